"""As a library, a run's INFO events go to its own events file, and stderr gets WARNING and up."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from asynceval import events
from asynceval._event_output import events_path_for, run_events_file


def test_a_library_run_prints_no_info_lines_on_stderr(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        from asynceval import Benchmark, Task

        class Echo(Benchmark):
            async def setup_agents(self, agent_data, environment, task, user):
                async def echo(query):
                    return query
                return [echo], {"echo": echo}

        reports = Echo().run_sync([Task(query="q")])
        print(len(reports))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"
    assert '"level": "INFO"' not in done.stderr


@pytest.mark.anyio
async def test_two_runs_at_once_each_write_their_own_events_file(tmp_path: Path) -> None:
    async def run(name: str) -> None:
        with run_events_file(tmp_path / f"{name}.jsonl"), events.bind_context(run_id=name):
            for _ in range(3):
                events.emit("probe", who=name)
                await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "a")
        tg.start_soon(run, "b")
    for name in ("a", "b"):
        lines = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert [line["who"] for line in lines] == [name] * 3
        assert {line["run_id"] for line in lines} == {name}


def test_the_events_file_sits_beside_the_results_file() -> None:
    assert events_path_for("d/results.jsonl") == "d/events.jsonl"
    assert events_path_for("d/app.jsonl") == "d/app.events.jsonl"
