"""Edges of `asynceval` a person meets, each tried from outside (the CLI in a subprocess): what
they are told is one plain line, named for what happened, never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "asynceval"]
ROOT = Path(__file__).resolve().parents[2]
ARITHMETIC = str(ROOT / "examples" / "arithmetic.py")


def asynceval(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a command that failed as a person's mistake should."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _closed_port() -> int:
    """A local port nobody listens on (bound, then closed): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_refused_connection_is_called_a_refused_connection_not_a_timeout(
    tmp_path: Path, transport: str
) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"query": "What is 1 * 7?", "id": "t"}\n')
    done = asynceval(
        "run", ARITHMETIC, "--tasks", "tasks.jsonl", "--repeats", "1", "--quiet", "--out", "o",
        "--base-url", f"http://127.0.0.1:{_closed_port()}/v1", "--model", "m",
        cwd=tmp_path,
        env={"RETRY_MAX_ATTEMPTS": "1", "LLM_HTTP_TRANSPORT": transport},
    )  # fmt: skip
    lines = (tmp_path / "o" / "results.jsonl").read_text().splitlines()
    errors = [json.loads(line)["error"]["message"] for line in lines[1:]]
    assert len(errors) == 1, (done.stderr, lines)
    assert "ConnectError: connection refused" in errors[0] and "Timeout" not in errors[0]


NO_AGENTS = """
from asynceval import Benchmark, Task


class NoAgents(Benchmark):
    def default_tasks(self):
        return [Task(query="q", id="t")]
"""


@pytest.mark.parametrize("target", ["no_agents.py", "no_agents.py:NoAgents"])
def test_a_benchmark_without_setup_agents_is_named_with_what_it_lacks(
    tmp_path: Path, target: str
) -> None:
    (tmp_path / "no_agents.py").write_text(NO_AGENTS)
    done = asynceval("run", target, "--out", "o", cwd=tmp_path)
    assert _one_line(done).startswith(
        f"asynceval run: '{target}': the Benchmark class NoAgents cannot be built: "
        "it does not define setup_agents"
    )
    assert not (tmp_path / "o").exists()
