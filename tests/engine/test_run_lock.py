"""One writer per results file, and resume refusing what is not its own: the API's side of the
run directory (the CLI's is in tests/cli/test_run_directory.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from asynceval import Benchmark, Task
from asynceval.engine import read_records
from asynceval.engine.run_lock import holder_of
from asynceval.errors import ConfigError, RunLocked

from ..conftest import EventLog


class Echo(Benchmark):
    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        return [lambda query: query], {}


class Other(Echo):
    pass


def tasks(n: int) -> list[Task]:
    return [Task(query=i, id=f"t{i}") for i in range(n)]


HOLD = """
import sys, time
from asynceval.engine.run_lock import hold
with hold(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_warning(
    tmp_path: Path, event_log: EventLog
) -> None:
    path = tmp_path / "results.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        live = holder_of(path)
        assert live is not None and live.pid == holder.pid
        with pytest.raises(RunLocked, match=rf"pid {holder.pid} on "):
            Echo().run_sync(tasks(2), results_path=path)
        assert not path.exists()  # refused before anything was written
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert holder_of(path) is None  # the OS let go of it with the process
    Echo().run_sync(tasks(2), results_path=path)
    (taken,) = event_log.named("run_lock_taken_over")
    assert taken["pid"] == holder.pid and taken["level"] == "WARNING"
    assert len(read_records(path)[0]) == 3
    Echo().run_sync(tasks(2), results_path=path, resume=True)  # released cleanly: no warning
    assert len(event_log.named("run_lock_taken_over")) == 1
    assert not Path(f"{path}.lock").exists()  # a run that ends removes its lock


def test_a_file_that_is_not_a_results_file_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    for text in ("garbage text, not JSON\n", '{"status": "success", "task_id": "t0"}\n'):
        path.write_text(text)
        for resume in (True, False):
            with pytest.raises(ConfigError, match="is not an asynceval results file"):
                Echo().run_sync(tasks(3), results_path=path, resume=resume)
            assert path.read_text() == text
    with pytest.raises(ConfigError, match="is a folder"):
        Echo().run_sync(tasks(1), results_path=tmp_path)


def test_resume_refuses_the_results_of_another_benchmark_or_task_set(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    Echo().run_sync(tasks(4), results_path=path)
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="holds a run of benchmark Echo, not Other"):
        Other().run_sync(tasks(4), results_path=path, resume=True)
    with pytest.raises(ConfigError, match=r"another task set \(4 tasks.*these are 5"):
        Echo().run_sync(tasks(5), results_path=path, resume=True)
    assert path.read_bytes() == before
    Echo().run_sync(tasks(4), results_path=path, resume=True)  # its own: fine
    header = json.loads(before.splitlines()[0])
    assert header["task_set"]["count"] == 4 and len(header["task_set"]["ids_sha256"]) == 64


def test_a_run_id_given_names_the_run_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    reports = Echo().run_sync(tasks(1), results_path=path, run_id="my-run-1")
    assert reports[0]["run_id"] == "my-run-1"
    assert read_records(path)[0][0]["run_id"] == "my-run-1"
    for bad in ("", "a/b", "..", "x\n"):
        with pytest.raises(ConfigError, match="run_id must be"):
            Echo().run_sync(tasks(1), run_id=bad)


def test_the_lock_is_held_for_the_run_only(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    seen: list[Any] = []

    class Looking(Echo):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            seen.append(holder_of(path))
            return await super().setup_agents(agent_data, environment, task, user)

    started = time.time()
    Looking().run_sync(tasks(1), results_path=path)
    (during,) = seen
    assert during is not None and during.pid == os.getpid() and during.started_at
    assert holder_of(path) is None
    assert time.time() - started < 30


LIBRARY_RUN = """
import asyncio, sys
from asynceval import Benchmark, OpenAIChatModel, Task

class One(Benchmark):
    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel()
        async def agent(query):
            return (await model.generate(query)).text
        return [agent], {}

async def main():
    reports = await One().run(
        [Task(query="What is 2 + 2?", id="a"), Task(query="What is 3 + 3?", id="b")],
        results_path=sys.argv[1],
    )
    print(len(reports))

asyncio.run(main())
"""


def test_a_library_run_keeps_its_events_beside_its_results_and_stderr_quiet(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOG_", "LLM_"))}
    for name, events in (("results.jsonl", "events.jsonl"), ("other.jsonl", "other.events.jsonl")):
        done = subprocess.run(
            [sys.executable, "-c", LIBRARY_RUN, str(tmp_path / name)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "2\n", "")
        lines = [json.loads(x) for x in (tmp_path / events).read_text().splitlines()]
        names = [e["event"] for e in lines]
        assert names[0] == "run_started" and names[-1] == "run_finished"
        assert names.count("acquired") == 2 and names.count("task_finished") == 2


RACE = """
import os, sys, time
from asynceval.errors import RunLocked
from asynceval.engine.run_lock import hold
path, log, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
held = 0
while held < rounds:
    try:
        with hold(path):
            with open(log, "a") as f:
                f.write(f"+{os.getpid()}\\n")
            time.sleep(0.001)
            with open(log, "a") as f:
                f.write(f"-{os.getpid()}\\n")
        held += 1
    except RunLocked:
        time.sleep(0.0005)
"""


def test_processes_racing_for_a_lock_never_hold_it_at_once(tmp_path: Path) -> None:
    """Taken and released (its file removed) hundreds of times by 6 processes at once: never
    two holders, whatever the order of open, lock and unlink."""
    path, log = tmp_path / "results.jsonl", tmp_path / "holders.log"
    racers = [
        subprocess.Popen([sys.executable, "-c", RACE, str(path), str(log), "80"]) for _ in range(6)
    ]
    assert [racer.wait(timeout=120) for racer in racers] == [0] * 6
    lines = log.read_text().split()
    assert len(lines) == 6 * 80 * 2
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("+") and leave == "-" + enter[1:], (enter, leave)
    assert not Path(f"{path}.lock").exists()
