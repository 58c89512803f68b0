"""`asynceval run` exits right after its summary even when a sync thread abandoned by a task
timeout never returns, and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BENCH = """
import threading

from asynceval import Benchmark, SyncAgent, Task, TaskProtocol


class Forever:
    def run(self, query):
        threading.Event().wait()  # never returns


class Stuck(Benchmark):
    def default_tasks(self):
        return [Task(query="q", id="stuck", protocol=TaskProtocol(timeout_seconds=0.3))]

    async def setup_agents(self, agent_data, environment, task, user):
        agent = SyncAgent(Forever())
        return [agent], {"agent": agent}


benchmark = Stuck
"""


def test_the_cli_exits_promptly_despite_a_thread_that_never_returns(tmp_path: Path) -> None:
    (tmp_path / "stuck.py").write_text(textwrap.dedent(BENCH))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "LOG_", "MAX_"))}
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-X", "dev", "-m", "asynceval.cli"),
            *("run", "stuck.py", "--out", "out", "--allow-errors"),  # it times out on purpose
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env=env,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 10
    assert "1 sync thread abandoned by task timeouts is still running" in done.stderr
    assert "Unclosed" not in done.stderr and "ResourceWarning" not in done.stderr
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    reports = [json.loads(line) for line in lines if '"header"' not in line]
    assert [r["status"] for r in reports] == ["task_timeout"]
    finished = [
        json.loads(line)
        for line in (tmp_path / "out" / "events.jsonl").read_text().splitlines()
        if '"run_finished"' in line
    ]
    assert finished[-1]["threads_still_running"] == 1
