"""Failures during a run are visible and fail it, from outside: a bad API key (401), a provider
that is down, and a bug in the user's agent each exit 1 with one line per kind of error on
stderr (exit 0 with --allow-errors); a bug in the benchmark's default_tasks() is one line, exit 2;
every option of `run --help` says what it does and what it defaults to."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "asynceval"]
HERE = Path(__file__).parent
SLOW = str(HERE / "slow_bench.py")

BUGGY = """
from asynceval import Benchmark, Task

class Buggy(Benchmark):
    def default_tasks(self):
        return [Task(query=f"q{i}", id=f"t{i}") for i in range(3)]

    async def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            return query.no_such_attribute
        return [agent], {}
"""

TASKS = """
from asynceval import Benchmark, Task

class Tasks(Benchmark):
    def default_tasks(self):
        return {KIND}

    async def setup_agents(self, agent_data, environment, task, user):
        return [lambda query: query], {{}}
"""


def asynceval(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "LOG_"))}
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=90,
        env={**clean, **(env or {})},
        check=False,
    )


def error_lines(stderr: str) -> list[str]:
    """The error summary's lines (not the warning, at the start, about a model with no price)."""
    lines = [line.strip() for line in stderr.strip().splitlines()]
    return [line for line in lines if not line.startswith("asynceval run: warning: the model")]


def test_a_bug_in_the_users_agent_fails_the_run_and_is_named_as_theirs(tmp_path: Path) -> None:
    (tmp_path / "buggy.py").write_text(BUGGY)
    done = asynceval("run", "buggy.py", "--out", "o", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = error_lines(done.stderr)
    assert lines[0] == (
        "asynceval: 3 of 3 repetitions ended in an error (--allow-errors exits 0 all the same):"
    )
    assert lines[1].startswith("3 your agent raised: AttributeError: 'str' object has no attribute")
    assert "infrastructure" not in done.stdout + done.stderr
    assert "your agent raised" in done.stdout  # the summary groups them too
    allowed = asynceval("run", "buggy.py", "--out", "o2", "--allow-errors", "--quiet", cwd=tmp_path)
    assert (allowed.returncode, allowed.stderr) == (0, "")


def test_a_bad_api_key_fails_the_run_as_the_provider_refusing(
    tmp_path: Path, sim_server: Callable[..., str]
) -> None:
    base_url = sim_server("--fail-first", "1000", "--fail-first-status", "401")
    done = asynceval(
        "run",
        SLOW,
        "--base-url",
        base_url,
        "--model",
        "sim",
        "--out",
        "o",
        "--quiet",
        "--tasks",
        str(_tasks(tmp_path, 4)),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    lines = error_lines(done.stderr)
    assert lines[0].startswith("asynceval: 4 of 4 repetitions ended in an error")
    assert re.match(r"4 provider refused: .*HTTP 401", lines[1]), lines


def test_a_provider_that_is_down_fails_the_run_as_unreachable(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        done = asynceval(
            "run",
            SLOW,
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "sim",
            "--out",
            "o",
            "--quiet",
            "--tasks",
            str(_tasks(tmp_path, 2)),
            cwd=tmp_path,
            env={"RETRY_MAX_ATTEMPTS": "1"},
        )
    assert done.returncode == 1, done.stderr
    lines = error_lines(done.stderr)
    assert re.match(r"2 provider unreachable: .*ConnectError: connection refused", lines[1]), lines
    assert "ConnectTimeout" not in done.stderr


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ('[Task(query="a", id="x"), Task(query="b", id="x")]', "task id 'x' appears twice"),
        ('[{"id": "no-query"}]', "task 0:"),
        ("42", "default_tasks() returned int, not a list of tasks"),
        ('"abc"', "default_tasks() returned str, not a list of tasks"),
        ("[]", "default_tasks() returned no task"),
    ],
)
def test_a_bad_default_tasks_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, kind: str, said: str
) -> None:
    (tmp_path / "bench.py").write_text(TASKS.format(KIND=kind))
    done = asynceval("run", "bench.py", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done.stderr)
    assert line.startswith("asynceval run: bench.py: default_tasks") and said in line, line
    assert not (tmp_path / "o").exists()


def test_every_run_option_says_what_it_does_and_its_default(tmp_path: Path) -> None:
    done = asynceval("run", "--help", cwd=tmp_path, env={"COLUMNS": "100"})
    assert done.returncode == 0
    entries: list[str] = []
    for line in done.stdout.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):
            entries.append(line.strip())
        elif line.startswith("    ") and entries:
            entries[-1] += "  " + line.strip()
    described = {}
    for entry in entries:
        invocation, _, text = entry.partition("  ")  # argparse puts 2+ spaces before the help
        described[invocation.split()[0].rstrip(",")] = text.strip()
    assert len(described) >= 19, done.stdout
    for option, text in described.items():
        if option in ("-h", "--help"):
            continue
        assert text, f"{option} has no description"
        switch = option in ("--quiet", "--field")  # what they do is what they change
        assert switch or "default" in text, f"{option} does not say its default: {text}"


def _tasks(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(f'{{"id": "t{i}", "query": "What is {i} + 1?"}}\n' for i in range(n)))
    return path
