"""The command line as a person runs it: `python -m asynceval ...` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "asynceval"]


def asynceval(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """Run `asynceval ARGS` in `cwd` with the environment plus `env`; never raises on a
    non-zero exit (the tests look at it)."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """`asynceval ARGS` started in `cwd`, its output piped (for signals sent while it runs)."""
    return subprocess.Popen(
        [*CLI, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
