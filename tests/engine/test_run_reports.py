"""RunReports: what `Benchmark.run` returns, the run's own reports read back from its results
file on demand (a temporary file the object owns when the run was given no results_path)."""

from __future__ import annotations

import gc
import glob
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from asynceval import Benchmark, Task
from asynceval.engine import REPORT_KEYS, RunReports, TaskQueue, read_records
from asynceval.errors import RunLocked, TaskSpecError

TEMPORARY_PATTERN = "asynceval-reports-*.jsonl"


class Instant(Benchmark):
    """An agent that answers at once (no LLM call) and a judge whose entry holds a tuple."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> Any:
            return f"answer to {query}"

        return [agent], {"main": agent}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        def judge(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": True, "pair": (1, "two"), "answer": answer}

        return [judge]


def tasks(*ids: str) -> list[Task]:
    return [Task(query=f"q-{tid}", id=tid) for tid in ids]


def pairs(reports: Any) -> set[tuple[str, int]]:
    return {(r["task_id"], r["repeat_idx"]) for r in reports}


def exists(path: str) -> bool:
    return os.path.exists(path)


def listing(directory: Path) -> list[Path]:
    return list(directory.iterdir())


def temporary_files() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), TEMPORARY_PATTERN)))


@pytest.fixture
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tempfile.gettempdir()` is this test's own directory: no other process's files count."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    assert tempfile.gettempdir() == str(directory)
    return directory


async def test_reports_are_a_read_only_sequence_of_this_runs_repetitions(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    bench = Instant(n_task_repeats=2)
    reports = await bench.run(tasks("a", "b", "c"), results_path=path)

    assert isinstance(reports, RunReports)
    assert len(reports) == 6
    assert pairs(reports) == {(tid, r) for tid in "abc" for r in (0, 1)}
    assert reports.path == str(path)
    assert not reports.temporary

    as_list = list(reports)
    assert len(as_list) == 6
    assert reports == as_list
    assert as_list == list(iter(reports))
    assert reports[0] == as_list[0]
    assert reports[-1] == as_list[-1]
    assert reports[-6] == as_list[0]
    assert reports[5] == as_list[5]
    with pytest.raises(IndexError):
        reports[6]
    with pytest.raises(IndexError):
        reports[-7]

    sliced = reports[1:4]
    assert isinstance(sliced, list)
    assert sliced == as_list[1:4]
    assert reports[::2] == as_list[::2]
    assert reports[::-1] == as_list[::-1]
    assert reports[10:] == []

    for report in reports:
        assert tuple(report) == REPORT_KEYS
        assert report["status"] == "success"
        assert isinstance(report["task_id"], str) and report["repeat_idx"] in (0, 1)
        assert report["eval"][0]["answer"] == f"answer to q-{report['task_id']}"

    # The same reports as the results file holds (its header aside).
    records, damaged = read_records(path)
    assert damaged == 0
    assert [r for r in records if r.get("type") != "header"] == as_list

    assert bench.reports == as_list
    assert bench.reports.path == reports.path


async def test_a_report_differs_from_a_list_of_other_reports(tmp_path: Path) -> None:
    reports = await Instant().run(tasks("a", "b"), results_path=tmp_path / "r.jsonl")
    as_list = list(reports)
    assert reports != as_list[:1]
    assert reports != [*as_list, as_list[0]]
    assert reports != [as_list[1], as_list[0]]
    assert reports != "not a list"


async def test_a_second_run_into_the_same_file_returns_only_its_own_reports(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    first = await Instant().run(tasks("a", "b"), results_path=path)
    assert pairs(first) == {("a", 0), ("b", 0)}

    second = await Instant().run(tasks("c", "d", "e"), results_path=path)
    assert len(second) == 3
    assert pairs(second) == {("c", 0), ("d", 0), ("e", 0)}
    assert second.path == first.path == str(path)

    # The first run's object still reads its own range of the (grown) file.
    assert len(first) == 2 and pairs(first) == {("a", 0), ("b", 0)}
    # Concatenated as the lists run() used to return were: a list, in order.
    joined = first + second
    assert isinstance(joined, list) and joined == [*first, *second]
    radd = list(first) + second  # list + RunReports
    assert radd == joined and first + list(second) == joined
    records, _ = read_records(path)
    assert len([r for r in records if r.get("type") == "header"]) == 2
    assert pairs(r for r in records if r.get("type") != "header") == pairs(first) | pairs(second)


async def test_a_resumed_run_returns_only_the_repetitions_it_ran(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    first = await Instant(n_task_repeats=2).run(tasks("a", "b", "c"), results_path=path)
    assert len(first) == 6
    lines = path.read_text().splitlines(keepends=True)  # as if killed before c's reports
    path.write_text("".join(x for x in lines if json.loads(x).get("task_id") != "c"))

    bench = Instant(n_task_repeats=2)
    resumed = await bench.run(tasks("a", "b", "c"), results_path=path, resume=True)
    assert len(resumed) == 2
    assert pairs(resumed) == {("c", 0), ("c", 1)}
    assert [r["task_id"] for r in resumed[:]] == ["c", "c"]
    assert bench.reports == list(resumed)

    # Nothing left to do: a third resume returns no report (the file only gains its header).
    again = await Instant(n_task_repeats=2).run(
        tasks("a", "b", "c"), results_path=path, resume=True
    )
    assert len(again) == 0
    assert list(again) == [] and again[:] == []


async def test_without_results_path_a_temporary_file_lives_as_long_as_the_reports(
    private_tempdir: Path,
) -> None:
    assert temporary_files() == set()
    bench = Instant(n_task_repeats=3)
    reports = await bench.run(tasks("a", "b"))

    assert reports.temporary is True
    path = reports.path
    assert path is not None
    assert exists(path)
    assert temporary_files() == {path}
    assert len(reports) == 6
    assert pairs(reports) == {(tid, r) for tid in "ab" for r in range(3)}
    assert reports[-1]["status"] == "success"
    assert bench.reports is reports

    # Held by the benchmark alone: the file stays.
    del reports
    gc.collect()
    assert exists(path)

    # A new run replaces bench.reports: the first run's file goes, the new one is there.
    second = await bench.run(tasks("c"))
    gc.collect()
    assert not exists(path)
    assert second.path is not None and exists(second.path)
    assert temporary_files() == {second.path}

    second_path = second.path
    del second
    bench.reports = RunReports.empty()
    gc.collect()
    assert not exists(second_path)
    assert temporary_files() == set()


async def test_collect_false_returns_no_reports_and_writes_no_temporary_file(
    private_tempdir: Path, tmp_path: Path
) -> None:
    bench = Instant(n_task_repeats=2)
    reports = await bench.run(tasks("a", "b"), collect=False)
    assert isinstance(reports, RunReports)
    assert len(reports) == 0
    assert list(reports) == [] and reports == []
    assert reports.path is None
    assert temporary_files() == set()
    assert listing(private_tempdir) == []

    # With a results file: the reports are still written there, just not returned.
    path = tmp_path / "results.jsonl"
    reports = await bench.run(tasks("a", "b"), results_path=path, collect=False)
    assert len(reports) == 0 and reports.path is None
    records, _ = read_records(path)
    assert len([r for r in records if r.get("type") != "header"]) == 4
    assert temporary_files() == set()


async def test_values_come_back_as_json_types(tmp_path: Path) -> None:
    reports = await Instant().run(tasks("a"), results_path=tmp_path / "r.jsonl")
    entry = reports[0]["eval"][0]
    assert entry["pair"] == [1, "two"]
    assert isinstance(entry["pair"], list)
    assert entry["passed"] is True


class FailingQueue(TaskQueue):
    """Gives `good` tasks, then raises; records the temporary files present when it fails."""

    def __init__(self, good: int) -> None:
        self.given = 0
        self.good = good
        self.files_when_failing: set[str] = set()

    def next_task(self) -> Task | None:
        if self.given >= self.good:
            self.files_when_failing = temporary_files()
            raise RuntimeError("the queue broke")
        self.given += 1
        return Task(query="q", id=f"t{self.given}")


@pytest.mark.parametrize("good", [0, 3])
async def test_a_run_whose_queue_raises_leaves_no_temporary_file(
    private_tempdir: Path, good: int
) -> None:
    before = temporary_files()
    queue = FailingQueue(good)
    bench = Instant()
    with pytest.raises(RuntimeError, match="the queue broke"):
        await bench.run(queue=queue)
    assert len(queue.files_when_failing - before) == 1  # the run had its temporary file then
    gc.collect()
    assert temporary_files() == before
    assert listing(private_tempdir) == []


async def test_a_run_with_duplicate_lazy_task_ids_leaves_no_temporary_file(
    private_tempdir: Path,
) -> None:
    seen_during_run: list[set[str]] = []

    def lazy() -> Iterator[Mapping[str, Any]]:
        yield {"query": "q", "id": "same"}
        seen_during_run.append(temporary_files())
        yield {"query": "q", "id": "other"}
        yield {"query": "q", "id": "same"}

    before = temporary_files()
    with pytest.raises(TaskSpecError):
        await Instant().run(lazy())
    assert seen_during_run and len(seen_during_run[0] - before) == 1
    gc.collect()
    assert temporary_files() == before


async def test_a_run_with_duplicate_listed_task_ids_raises_before_any_file(
    private_tempdir: Path,
) -> None:
    before = temporary_files()
    with pytest.raises(TaskSpecError):
        await Instant().run(tasks("a", "b", "a"))
    gc.collect()
    assert temporary_files() == before


async def test_a_second_run_on_a_file_another_run_writes_is_refused_naming_the_holder(
    tmp_path: Path,
) -> None:
    import anyio

    path = tmp_path / "shared.jsonl"
    started = anyio.Event()

    class Slow(Instant):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def agent(query: Any) -> Any:
                started.set()
                await anyio.sleep(0.05)
                return query

            return [agent], {}

    got: dict[str, RunReports] = {}

    async def first() -> None:
        got["A"] = await Slow().run(tasks(*[f"A{i}" for i in range(4)]), results_path=path)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await started.wait()
        with pytest.raises(RunLocked, match=rf"pid {os.getpid()} on "):
            await Instant().run(tasks("B0"), results_path=path)
    assert pairs(got["A"]) == {(f"A{i}", 0) for i in range(4)}
    assert {r.get("task_id") for r in read_records(path)[0]} == {None, "A0", "A1", "A2", "A3"}
    await Instant().run(tasks("B0"), results_path=path)  # free again once the first ended


async def test_a_copy_or_a_pickle_is_a_plain_list_that_outlives_the_temporary_file(
    private_tempdir: Path,
) -> None:
    import copy
    import pickle

    bench = Instant()
    reports = await bench.run(tasks("a", "b"))
    expected = list(reports)
    copied, unpickled = copy.copy(reports), pickle.loads(pickle.dumps(reports))
    del reports
    bench.reports = RunReports.empty()
    gc.collect()
    assert not temporary_files()  # the file is gone with its owner ...
    assert copied == expected and unpickled == expected  # ... the copies hold the reports
    assert isinstance(copied, list) and isinstance(unpickled, list)


class Padded(Benchmark):
    """Some reports larger than what is written in place (IN_PLACE_BYTES): the writer thread."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> Any:
            return query

        return [agent], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        def judge(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            size = 70_000 if task.id.endswith(("1", "4")) else 10
            return {"passed": True, "pad": "x" * size}

        return [judge]


async def test_reports_written_through_the_writer_thread_are_read_back_in_order(
    tmp_path: Path,
) -> None:
    from asynceval.engine.results import IN_PLACE_BYTES

    ids = [f"t{i}" for i in range(8)]
    reports = await Padded(max_concurrent_tasks=1).run(tasks(*ids), results_path=tmp_path / "r")
    assert [r["task_id"] for r in reports] == ids  # one at a time: the order they finished
    sizes = [len(r["eval"][0]["pad"]) for r in reports]
    assert sizes == [70_000 if i in (1, 4) else 10 for i in range(8)]
    assert IN_PLACE_BYTES < 70_000
