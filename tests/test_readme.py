"""Every command and code block in README.md runs as written.

Python blocks run as scripts. Shell lines run in a scratch directory that holds the repository's
examples and a `.venv` link to the interpreter running the tests; the set-up line's install step is
the one `.ci/run` performs (checked here, not repeated), and `sim serve`, which serves until
stopped, is started, asked for its stats, and stopped.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
SHELL_LINES = [
    line.strip()
    for block in re.findall(r"```bash\n(.*?)```", README, re.S)
    for line in block.splitlines()
    if line.strip() and not line.strip().startswith("#")
]
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out like a checkout: examples/ and .venv/bin/{python,asynceval}."""
    root = tmp_path_factory.mktemp("readme")
    (root / "examples").symlink_to(ROOT / "examples")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    asynceval = bin_dir / "asynceval"
    asynceval.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m asynceval "$@"\n')
    asynceval.chmod(0o755)
    return root


def run_shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        line, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_readme_has_the_two_setup_commands() -> None:
    setup = re.search(r"## Set-up\n\n```bash\n(.*?)```", README, re.S)
    assert setup is not None
    install_and_run, tests = setup.group(1).strip().splitlines()
    assert install_and_run.startswith(INSTALL + " && ")
    assert tests == ".venv/bin/pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv" in ci and ".venv/bin/pip install" in ci and "-e '.[dev]'" in ci
    assert "\n.venv/bin/pytest\n" in ci


@pytest.mark.parametrize("line", SHELL_LINES)
def test_shell_line_runs_as_written(line: str, scratch: Path) -> None:
    if line.startswith(INSTALL):
        line = line.removeprefix(INSTALL + " && ")  # the install is .ci/run's own first step
    if line == ".venv/bin/pytest":
        return  # this very test suite
    if " sim serve " in f" {line} ":
        port = "18765"
        args = shlex.split(line.replace("--port 8000", f"--port {port}"))
        server = subprocess.Popen(args, cwd=scratch, start_new_session=True)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    stats = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5).json()
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            else:
                pytest.fail("sim serve did not start")
            assert stats["requests"] == 0
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=10)
        return
    done = run_shell(line, scratch)
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_python_block_runs_as_written(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"readme_{index}.py"
    script.write_text(PYTHON_BLOCKS[index])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Unclosed" not in done.stderr  # examples close what they open
