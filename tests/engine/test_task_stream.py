"""`open_tasks`: JSONL and CSV/TSV files read row by row, their first rows checked at open, the
rest as a run reaches them; `count()` without parsing; `tasks_source_info` for a manifest."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynceval.engine import Task, _source_scan, load_tasks, read_records
from asynceval.engine import datasets as datasets_module
from asynceval.engine.datasets import TaskStream, open_tasks, tasks_source_info
from asynceval.errors import TaskSpecError

from ._benches import Agents


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def task_line(index: int) -> str:
    return json.dumps({"id": f"t{index}", "query": f"q{index}"})


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> int:
    """Three rows checked at open, so that a short file streams past them."""
    monkeypatch.setattr(datasets_module, "CHECKED_AT_OPEN_ROWS", 3)
    return 3


def test_a_small_file_is_read_and_checked_whole_when_opened(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [task_line(1), "", task_line(2)])
    stream = open_tasks(path)
    assert stream.checked_whole and stream.count() == 2
    assert list(stream) == load_tasks(path)
    assert list(stream) == load_tasks(path)  # a file is read again
    write_lines(path, [task_line(1), task_line(1)])
    with pytest.raises(TaskSpecError, match=r"t.jsonl:2: task id 't1' appears twice \(first at"):
        open_tasks(path)


def test_a_long_file_is_checked_as_it_is_read_naming_the_line(
    tmp_path: Path, small_window: int
) -> None:
    """Rows past the window raise when reached, after every task before them."""
    lines = [task_line(i) for i in range(6)]
    path = write_lines(tmp_path / "t.jsonl", [*lines[:5], "{not json", lines[5]])
    stream = open_tasks(path)
    assert not stream.checked_whole
    got: list[Task] = []
    with pytest.raises(TaskSpecError, match=r"^\S*t.jsonl:6: not valid JSON"):
        got.extend(stream)
    assert [t.id for t in got] == [f"t{i}" for i in range(5)]
    path.write_text("".join(line + "\n" for line in [*lines, lines[1]]))
    with pytest.raises(TaskSpecError, match=r"t.jsonl:7: task id 't1' appears twice"):
        list(open_tasks(path))


def test_a_bad_or_missing_first_row_is_refused_when_the_stream_opens(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", ['{"question": "q"}', task_line(2)])
    with pytest.raises(TaskSpecError, match=r"t.jsonl:1: query: missing"):
        open_tasks(path)
    write_lines(path, ["", "  "])
    with pytest.raises(TaskSpecError, match=r"t.jsonl: no tasks in the file"):
        open_tasks(path)
    with pytest.raises(FileNotFoundError):
        open_tasks(tmp_path / "missing.jsonl")
    csv = write_lines(tmp_path / "t.csv", ["question,answer", "q,1"])
    with pytest.raises(TaskSpecError, match=r"t.csv: query: no column 'query'"):
        open_tasks(csv)


def test_a_run_of_a_stream_stops_at_a_bad_row_with_the_reports_before_it_on_disk(
    tmp_path: Path, small_window: int
) -> None:
    lines = [task_line(i) for i in range(8)]
    path = write_lines(tmp_path / "t.jsonl", [*lines[:6], '{"query": ""', *lines[6:]])
    results = tmp_path / "results.jsonl"

    async def run() -> None:
        await Agents().run(open_tasks(path), results_path=results)

    with pytest.raises(TaskSpecError, match=r"^\S*t.jsonl:7: not valid JSON"):
        anyio.run(run)
    records, _ = read_records(results)
    assert sorted(r["task_id"] for r in records[1:]) == [f"t{i}" for i in range(6)]


@pytest.mark.parametrize(
    ("name", "content", "rows"),
    [
        ("a.jsonl", '{"query": 1}\n\n  \r\n{"query": 2}\n\t\n{"query": 3}', 3),
        ("b.jsonl", '{"query": 1}\r\n {"query": 2}\r\n', 2),
        ("c.csv", "query,id\na,1\n\n\r\nb,2\nc,3", 3),
        ("d.csv", 'query,id\n"a\n\nb ""q""",1\n"c,d",2\n', 2),
        ("e.tsv", 'query\tid\n"x\ny"\t1\nz\t2\n', 2),
        ("f.csv", "query,id\n", 0),
    ],
)
def test_count_tells_the_rows_a_reader_yields_without_parsing(
    tmp_path: Path, name: str, content: str, rows: int
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    scanned = _source_scan.scan_file(str(path), path.suffix[1:])
    assert scanned.rows == rows
    assert scanned.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    if rows:
        assert scanned.rows == len(load_tasks(path))


def test_count_of_a_long_file_is_counted_on_bytes_across_blocks(
    tmp_path: Path, small_window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of 64 bytes: lines cut by a block, a line longer than one, blank lines at a cut."""
    monkeypatch.setattr(_source_scan, "_BLOCK", 64)
    lines = [task_line(i) for i in range(40)]
    lines[7] = json.dumps({"id": "long", "query": "x" * 300})
    lines[12:12] = ["", "   "]
    path = write_lines(tmp_path / "t.jsonl", lines)
    stream = open_tasks(path)
    assert stream.count() == 40 == len(list(stream))
    assert tasks_source_info(stream)["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_source_info_names_the_file_its_hash_and_the_mapping_as_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "quiz.csv"
    path.write_text("qid,question,answer\nq1,2+2?,4\nq2,3+3?,6\n")
    monkeypatch.chdir(tmp_path)
    stream = open_tasks(
        "quiz.csv", query="question", id="qid", fields={"evaluation_data": "answer"}
    )
    info = tasks_source_info(stream)
    assert info == {
        "source": "quiz.csv",
        "kind": "csv",
        "path": str(path.resolve()),
        "name": None,
        "config": None,
        "split": None,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "sha256_missing": None,
        "fingerprint": None,
        "rows": 2,
        "mapping": {"query": "question", "id": "qid", "fields": {"evaluation_data": ["answer"]}},
    }
    json.dumps(info)
    again = open_tasks(info["path"], split=info["split"], **info["mapping"])
    assert list(again) == list(stream)
    assert tasks_source_info(open_tasks("quiz.csv", query="question"))["mapping"] == {
        "query": "question",
        "id": None,
        "fields": {},
    }
    write_lines(tmp_path / "t.jsonl", [task_line(1)])
    assert tasks_source_info(open_tasks("t.jsonl"))["mapping"] is None  # Task-field rows


def test_a_json_list_is_held_whole_and_counted(tmp_path: Path, small_window: int) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"data": [{"query": f"q{i}", "id": str(i)} for i in range(5)]}))
    stream = open_tasks(path)
    assert stream.kind == "json" and stream.count() == 5 and len(list(stream)) == 5
    assert len(list(stream)) == 5


def test_a_saved_dataset_is_hashed_over_its_files_with_its_fingerprint(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list([{"query": "a"}, {"query": "b"}]).save_to_disk(tmp_path / "ds")
    info = tasks_source_info(open_tasks(tmp_path / "ds"))
    assert info["kind"] == "hfdir" and info["rows"] == 2 and info["path"] == str(tmp_path / "ds")
    assert len(info["sha256"]) == 64 and isinstance(info["fingerprint"], str)


def test_a_hub_dataset_has_no_file_hash_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")

    def load_dataset(name: str, config: str | None, split: str | None) -> Any:
        return datasets.Dataset.from_list([{"question": "q1"}])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    info = tasks_source_info(open_tasks("hf:gsm8k:main@test", query="question"))
    assert info["sha256"] is None and "hub" in info["sha256_missing"]
    assert (info["name"], info["config"], info["split"], info["path"]) == (
        "gsm8k",
        "main",
        "test",
        None,
    )
    assert info["rows"] == 1 and info["fingerprint"]


def test_a_pipe_is_streamed_once_and_not_hashed(tmp_path: Path, small_window: int) -> None:
    fifo = tmp_path / "tasks.jsonl"
    os.mkfifo(fifo)
    content = "".join(task_line(i) + "\n" for i in range(5))
    write = f"open({str(fifo)!r}, 'w').write({content!r})"
    writer = subprocess.Popen([sys.executable, "-c", write])
    try:
        stream = open_tasks(fifo)
        info = tasks_source_info(stream)
        assert info["sha256"] is None and "not a regular file" in info["sha256_missing"]
        assert stream.count() is None and len(list(stream)) == 5
        with pytest.raises(TaskSpecError, match="already read"):
            iter(stream)
    finally:
        writer.wait(timeout=10)


PEAK = """
import resource, sys
from asynceval.engine.datasets import open_tasks
count = sum(1 for _ in open_tasks(sys.argv[1]))
print(count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow
def test_a_long_file_streams_in_the_memory_of_a_short_one_plus_the_ids(tmp_path: Path) -> None:
    """300,000 lines (43 MB, 400 MB when loaded whole) against 10,000: peak RSS within 40 MB
    (the ids are 8 bytes each)."""
    peaks = {}
    for lines in (10_000, 300_000):
        path = tmp_path / f"{lines}.jsonl"
        with path.open("w") as file:
            for i in range(lines):
                row = {"id": f"t{i}", "query": f"What is {i} * 7?", "metadata": {"n": i}}
                file.write(json.dumps(row) + "\n")
        done = subprocess.run(
            [sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, check=True
        )
        count, peak_kib = map(int, done.stdout.split())
        assert count == lines
        peaks[lines] = peak_kib / 1024
    assert peaks[300_000] - peaks[10_000] < 40, peaks


def test_a_stream_is_no_sequence_so_the_engine_reads_it_lazily(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [task_line(1)])
    stream = open_tasks(path)
    assert isinstance(stream, TaskStream) and not hasattr(stream, "__len__")
    assert repr(stream).startswith("TaskStream(")
