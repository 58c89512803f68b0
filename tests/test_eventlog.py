"""Event lines to a LOG_FILE: written at once, except during a run (`events.batching()`), where
the lines of one event-loop turn go out together at its end (early past 256 waiting lines, or by
`events.flush()`); whole lines from any thread; failures counted line by line."""

from __future__ import annotations

import io
import json
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from asynceval import Benchmark, Settings, Task, _event_output, configure_logging, events


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    """Events go to a LOG_FILE for this test; it is closed (and replaced) afterwards."""
    path = tmp_path / "events.jsonl"
    configure_logging(Settings(log_file=str(path), log_level="DEBUG"))
    yield path
    configure_logging(Settings(log_level="DEBUG"), stream=io.StringIO())


def lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return path.read_text(encoding="utf-8").splitlines()


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(path)]


def probes(path: Path) -> list[int]:
    return [r["n"] for r in records(path) if r["event"] == "probe"]


def test_off_an_event_loop_a_line_is_in_the_file_at_once(log_file: Path) -> None:
    events.emit("probe", n=1)
    assert probes(log_file) == [1]
    events.emit("probe", n=2)
    assert probes(log_file) == [1, 2]


async def test_outside_a_run_a_line_is_written_at_once_even_in_a_loop(log_file: Path) -> None:
    events.emit("probe", n=1)  # a script's model call, say: its loop may stop at any moment
    assert probes(log_file) == [1]


async def test_the_lines_of_one_loop_turn_are_written_when_it_ends(log_file: Path) -> None:
    with events.batching():
        for n in range(5):
            events.emit("probe", n=n)
        assert probes(log_file) == []  # still waiting for the turn to end
        await anyio.lowlevel.checkpoint()
        assert probes(log_file) == [0, 1, 2, 3, 4]
        events.emit("probe", n=5)
        events.emit("probe", n=6)
        await anyio.lowlevel.checkpoint()
        assert probes(log_file) == [0, 1, 2, 3, 4, 5, 6]
        events.emit("probe", n=7)
    assert probes(log_file)[-1] == 7  # leaving batching writes what waits
    # (Levels are checked in test_events: a secret registered by another test, such as the
    # key "INFO" in test_secrets_on_disk, blanks that word in every later line, by design.)


async def test_flush_writes_the_waiting_lines_at_once(log_file: Path) -> None:
    with events.batching():
        events.emit("probe", n=1)
        events.emit("probe", n=2)
        assert probes(log_file) == []
        events.flush()  # no await in between: the turn has not ended
        assert probes(log_file) == [1, 2]
        await anyio.lowlevel.checkpoint()  # the scheduled write finds nothing left
        assert probes(log_file) == [1, 2]


async def test_a_long_turn_writes_as_it_goes(log_file: Path) -> None:
    with events.batching():
        for n in range(255):
            events.emit("probe", n=n)
        assert probes(log_file) == []  # 255 wait for the turn's end
        for n in range(255, 300):
            events.emit("probe", n=n)
        assert probes(log_file) == list(range(256))  # the 256th wrote them all at once
        await anyio.lowlevel.checkpoint()
        assert probes(log_file) == list(range(300))


async def test_every_line_a_failing_file_loses_is_counted_and_warned_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynceval._writer import AppendOnlyFile

    configure_logging(Settings(log_file=str(tmp_path / "events.jsonl")))

    def refuse(self: AppendOnlyFile, data: bytes) -> int:
        raise OSError(28, "No space left on device", self.path)

    monkeypatch.setattr(AppendOnlyFile, "write", refuse)
    monkeypatch.setattr(_event_output, "_write_failures", 0)
    try:
        with warnings.catch_warnings(record=True) as caught, events.batching():
            warnings.simplefilter("always")
            for n in range(5):  # one turn: one batch of five lines lost
                events.emit("probe", n=n)
            await anyio.lowlevel.checkpoint()
        assert [str(w.message) for w in caught if "could not write" in str(w.message)]
        assert len(caught) == 1
        assert events.write_failures() == 5
        events.emit("probe", n=5)  # written at once (no batching): one more
        assert events.write_failures() == 6
    finally:
        monkeypatch.undo()
        configure_logging(Settings(log_level="DEBUG"), stream=io.StringIO())


def test_a_forked_child_does_not_write_its_parents_waiting_lines(log_file: Path) -> None:
    import os

    async def main() -> None:
        with events.batching():
            events.emit("probe", n=1)  # waiting for the turn to end when the fork happens
            pid = os.fork()
            if pid == 0:  # the child writes a line of its own (at once: no loop runs there)
                events.emit("probe", n=2)
                os._exit(0)
            _, status = await anyio.to_thread.run_sync(os.waitpid, pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0

    anyio.run(main)
    assert sorted(probes(log_file)) == [1, 2]  # the parent's line once, not again from the child


def test_an_unknown_level_is_refused_and_structlogs_names_work(log_file: Path) -> None:
    with pytest.raises(ValueError, match="unknown event level"):
        events.emit("probe", level="loud", n=0)
    events.emit("probe", level="warn", n=1)
    events.emit("probe", level="fatal", n=2)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        events.emit("probe", level="exception", n=3)
    levels = {r["n"]: r["level"] for r in records(log_file) if r["event"] == "probe"}
    assert levels == {1: "WARNING", 2: "CRITICAL", 3: "ERROR"}
    assert "RuntimeError: boom" in next(r for r in records(log_file) if r["n"] == 3)["exception"]


class Instant(Benchmark):
    """An agent that answers without awaiting anything."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def instant(query: Any) -> Any:
            return query  # no await: the repetition never yields on its own

        return [instant], {"main": instant}


async def test_a_run_of_instant_answers_lets_other_tasks_run(log_file: Path) -> None:
    n_tasks = 300
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async def run() -> None:
        nonlocal done
        try:
            tasks = [Task(query=f"q{i}", id=f"t{i}") for i in range(n_tasks)]
            reports = await Instant(max_concurrent_tasks=2).run(tasks, collect=False)
            assert len(reports) == 0
        finally:
            done = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()  # the ticker is running before the run starts
        ticks_before = ticks
        await run()
    assert ticks - ticks_before >= 50

    written = records(log_file)
    finished = [r for r in written if r["event"] == "task_finished"]
    assert len(finished) == n_tasks
    assert {r["status"] for r in finished} == {"success"}
    assert written[-1]["event"] in ("run_finished", "no_llm_calls")


def test_events_of_two_threads_with_their_own_loops_are_all_whole_lines(log_file: Path) -> None:
    per_thread = 400
    errors: list[BaseException] = []

    async def emit_many(name: str) -> None:
        for n in range(per_thread):
            events.emit("probe", thread=name, n=n, padding="x" * 200)
            if n % 7 == 0:
                await anyio.lowlevel.checkpoint()

    def worker(name: str) -> None:
        try:
            anyio.run(emit_many, name)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    with events.batching():  # as during a run: both loops' lines wait for their turns' ends
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
    assert not errors
    assert not any(thread.is_alive() for thread in threads)

    raw = lines(log_file)
    parsed = [json.loads(line) for line in raw]  # every line valid JSON: none interleaved
    assert len(parsed) == 2 * per_thread
    for name in ("a", "b"):
        assert [r["n"] for r in parsed if r.get("thread") == name] == list(range(per_thread))


def test_a_warning_about_a_lost_line_may_itself_write_an_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lost line warns; an application that turns warnings into events (a
    `showwarning` hook, `logging.captureWarnings` with a handler that emits) writes from inside
    that warning: the log's lock is not held then, so it does not deadlock."""
    from asynceval._writer import AppendOnlyFile

    configure_logging(Settings(log_file=str(tmp_path / "events.jsonl")))
    monkeypatch.setattr(_event_output, "_write_failures", 0)
    refused = []

    def refuse(self: AppendOnlyFile, data: bytes) -> int:
        refused.append(data)
        raise OSError(28, "No space left on device", self.path)

    def as_event(message: Any, *args: Any, **kwargs: Any) -> None:
        events.emit("warning_seen", message=str(message))

    monkeypatch.setattr(AppendOnlyFile, "write", refuse)
    monkeypatch.setattr(warnings, "showwarning", as_event)
    done = threading.Event()

    def emit() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = as_event
            events.emit("probe", n=0)
        done.set()

    try:
        threading.Thread(target=emit, daemon=True).start()
        assert done.wait(5), "writing an event from the lost-line warning deadlocked"
        assert len(refused) == 2  # the probe, then the warning's own event (lost too)
        assert events.write_failures() == 2
    finally:
        monkeypatch.undo()
        configure_logging(Settings(log_level="DEBUG"), stream=io.StringIO())
