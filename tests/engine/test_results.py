"""The results file: header and lines, no secrets, group commit, values JSON cannot hold, lines
cut short, resume after a SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from asynceval import Benchmark, Settings, Task
from asynceval.engine import read_records, successful_pairs
from asynceval.engine.results import successful_reports

from ._benches import Agents

HERE = Path(__file__).parent


def drop_reports(path: Path, *task_ids: str) -> None:
    """As if the run had been killed before these tasks' reports were written."""
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line).get("task_id") not in task_ids]
    path.write_text("".join(kept))


class Echo(Benchmark):
    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> Any:
            await anyio.sleep(0.001)
            return query

        return [agent], {}


async def test_header_then_one_line_per_report_without_secrets(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.jsonl"
    settings = Settings(llm_api_key="sk-results-secret-000111", llm_base_url="http://h/v1")
    reports = await Echo(n_task_repeats=3, settings=settings).run(
        [Task(query=i, id=str(i)) for i in range(20)], results_path=path
    )
    records, damaged = read_records(path)
    header, lines = records[0], records[1:]
    assert damaged == 0 and header["type"] == "header" and len(lines) == 60
    assert header["settings"]["llm_api_key_set"] is True and header["asynceval_version"]
    text = path.read_text()
    assert "sk-results-secret-000111" not in text
    assert sorted(json.dumps(r, sort_keys=True) for r in lines) == sorted(
        json.dumps(r, sort_keys=True, default=str) for r in reports
    )


async def test_resume_skips_successful_pairs_and_mends_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query=i, id=str(i)) for i in range(10)]
    await Echo().run(tasks, results_path=path)
    drop_reports(path, "6", "7", "8", "9")
    with path.open("a") as file:
        file.write('{"task_id": "cut sh')  # a kill in the middle of a line
    reports = await Echo().run(tasks, results_path=path, resume=True)
    assert sorted(r["task_id"] for r in reports) == ["6", "7", "8", "9"]
    records, damaged = read_records(path)
    assert damaged == 1 and sum(r.get("type") == "header" for r in records) == 2
    assert successful_pairs(path) == {(str(i), 0) for i in range(10)}


async def test_a_line_cut_inside_a_character_is_damaged_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query="héllo wörld ✓", id=str(i)) for i in range(4)]
    await Agents().run(tasks, results_path=path)
    drop_reports(path, "2", "3")
    with path.open("ab") as file:
        file.write('{"task_id": "2", "eval": "✓'.encode()[:-1])  # cut inside the ✓
    assert successful_pairs(path) == {("0", 0), ("1", 0)}
    reports = await Agents().run(tasks, results_path=path, resume=True)
    assert sorted(r["task_id"] for r in reports) == ["2", "3"]
    _, damaged = read_records(path)
    assert damaged == 1


def test_a_run_killed_half_way_then_resumed_runs_each_pair_exactly_once(tmp_path: Path) -> None:
    results, log = tmp_path / "results.jsonl", tmp_path / "started.log"
    script = [sys.executable, str(HERE / "resumable_run.py"), str(results), str(log)]
    first = subprocess.Popen(script, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # kill it once about a third of the work is on disk
        if results.exists() and len(results.read_text().splitlines()) > 25:
            break
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = successful_pairs(results)
    assert 10 < len(before) < 80, len(before)
    started_first = Counter(log.read_text().split())

    done = subprocess.run(
        [*script, "resume"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    records, _ = read_records(results)
    successes = Counter(
        (r["task_id"], r["repeat_idx"]) for r in records if r.get("status") == "success"
    )
    expected = {(f"task-{i}", r) for i in range(40) for r in range(2)}
    assert set(successes) == expected and set(successes.values()) == {1}
    # The second process started exactly the repetitions not already successful: a success from
    # the first process never ran again (and the first process's failures did).
    started_second = Counter(log.read_text().split()) - started_first
    assert sum(started_second.values()) == 80 - len(before)
    for task_id in {t for t, _ in before}:
        assert started_second[task_id] == 2 - sum(1 for t, _ in before if t == task_id)


def test_reading_a_results_file_for_resume_streams_it(tmp_path: Path) -> None:
    """Resuming a file of large traces costs about what its successes' evals do, not the file."""
    import tracemalloc

    path = tmp_path / "results.jsonl"
    trace = "x" * 20_000
    with path.open("w") as file:
        file.write(json.dumps({"type": "header"}) + "\n")
        for i in range(500):  # about 10 MB
            record = {"task_id": f"t{i}", "repeat_idx": 0, "status": "success"}
            file.write(json.dumps({**record, "eval": [{"passed": True}], "traces": trace}) + "\n")
    tracemalloc.start()
    try:
        reports = successful_reports(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(reports) == 500 and "traces" not in reports[("t0", 0)]
    assert peak < 2_000_000  # bytes: far below the file's 10 MB


def test_a_line_nested_too_deep_to_read_is_a_damaged_line(tmp_path: Path) -> None:
    """`report`, `compare`, `--resume` and the view read results files the same way: a line
    json cannot read without exhausting the stack is damaged, never a RecursionError."""
    path = tmp_path / "results.jsonl"
    good = {"task_id": "t", "repeat_idx": 0, "status": "success"}
    path.write_text(json.dumps(good) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    assert read_records(path) == ([good], 1)
    done = subprocess.run(
        [sys.executable, "-m", "asynceval", "report", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "damaged lines" in done.stdout, done.stderr


class _ReprRaises:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def _nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


class Hostile(Echo):
    """Evaluation results JSON cannot hold as they are: a repr that raises, 3,000 levels of
    lists, an int too long for text (above Python's 4,300 digits) as a score."""

    async def evaluate(self, evaluators: Any, agents: Any, answer: Any, traces: Any) -> Any:
        return [{"score": 10**5000, "odd": _ReprRaises(), "deep": _nested(3000)}]


async def test_values_json_cannot_hold_never_stop_a_run(tmp_path: Path) -> None:
    """Each report is written with notes in their place, and the run goes on to the end."""
    path = tmp_path / "results.jsonl"
    reports = await Hostile(max_concurrent_tasks=3).run(
        [Task(query=i, id=str(i)) for i in range(20)], results_path=path
    )
    assert len(reports) == 20 and {r["status"] for r in reports} == {"success"}
    records, damaged = read_records(path)
    assert damaged == 0 and len(records) == 21
    entry = records[1]["eval"][0]
    assert entry["score"] == "<int of 16610 bits>"
    assert entry["odd"] == "<_ReprRaises whose repr raised RuntimeError>"
    depth, deep = 0, entry["deep"]
    while isinstance(deep, list) and deep:
        depth, deep = depth + 1, deep[0]
    assert 150 < depth < 250 and deep == "<list nested deeper than 200>"


async def test_an_unencodable_report_is_written_and_spoils_no_other(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query=i, id=str(i)) for i in range(6)]
    tasks.insert(2, Task(query="x", id="bad", metadata={"do": "unencodable"}))
    await Agents().run(tasks, results_path=path)
    records, damaged = read_records(path)
    assert damaged == 0 and len(records) == 1 + 7
    bad = next(r for r in records if r.get("task_id") == "bad")
    answer = bad["eval"][0]["answer"]
    assert answer["('tuple', 'key')"] == "nan" and answer["cycle"] == ["<cycle list>"]
    assert "object object" in answer["object"]


async def test_hand_edited_success_lines_pair_with_nothing_and_the_resume_goes_on(
    tmp_path: Path,
) -> None:
    """Success lines without an id, or with a repeat that is no whole number, were a bare
    KeyError / ValueError; they pair with no repetition, and what they stood for runs again."""
    path = tmp_path / "results.jsonl"
    tasks = [Task(query=i, id=str(i)) for i in range(3)]
    await Echo().run(tasks, results_path=path)
    drop_reports(path, "1", "2")
    edited = [
        {"status": "success", "repeat_idx": 0},
        {"status": "success", "task_id": "1", "repeat_idx": 1.7},
        {"status": "success", "task_id": "1", "repeat_idx": "x"},
        {"status": "success", "task_id": "2", "repeat_idx": True},
        {"status": "success", "task_id": 2, "repeat_idx": 0},
    ]
    with path.open("a") as file:
        file.writelines(json.dumps(line) + "\n" for line in edited)
    assert set(successful_reports(path)) == {("0", 0)}
    reports = await Echo().run(tasks, results_path=path, resume=True)
    assert sorted(r["task_id"] for r in reports) == ["1", "2"]  # "0" was done already
    assert successful_pairs(path) == {("0", 0), ("1", 0), ("2", 0)}
