"""Task sources: JSONL, JSON, CSV/TSV and Hugging Face datasets (local directories; the hub only
through a stand-in `load_dataset`), the column mapping, and errors naming file, row and field."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import asynceval
from asynceval.engine import Task, iter_tasks, load_tasks
from asynceval.engine.datasets import parse_field_options
from asynceval.errors import TaskSpecError

ROWS = [
    {"question": "2+2?", "qid": 1, "answer": "4", "source": "book"},
    {"question": "3+3?", "qid": 2, "answer": "6", "source": "web"},
]
ANSWERS = {"evaluation_data": "answer"}


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --- JSONL and JSON ---------------------------------------------------------------------------


def test_a_jsonl_of_task_fields_without_a_mapping_reads_one_task_a_line(tmp_path: Path) -> None:
    """No mapping: each line is a dict of Task fields; unknown keys are still refused."""
    path = write_jsonl(tmp_path / "tasks.jsonl", [{"id": 3, "query": "q", "metadata": {"k": 1}}])
    assert load_tasks(path) == [Task(query="q", id="3", metadata={"k": 1})]
    assert load_tasks(str(path)) == list(iter_tasks(path))
    write_jsonl(path, [{"query": "q", "question": "q"}])
    with pytest.raises(TaskSpecError, match=r"^\S*tasks.jsonl:1: question: unknown field"):
        load_tasks(path)


def test_a_jsonl_with_a_mapping_takes_query_id_and_fields_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    path = write_jsonl(tmp_path / "qa.ndjson", ROWS)
    tasks = load_tasks(path, query="question", id="qid", fields=ANSWERS)
    assert tasks[0] == Task(
        query="2+2?", id="1", evaluation_data={"answer": "4"}, metadata={"source": "book"}
    )
    assert [t.id for t in tasks] == ["1", "2"]
    dropped = load_tasks(path, query="question", fields={**ANSWERS, "metadata": []})
    assert dropped[0].metadata == {} and dropped[0].id.startswith("task-")  # qid dropped too


def test_columns_named_after_task_fields_fill_them_as_is(tmp_path: Path) -> None:
    """Renaming the query keeps a row's own id, evaluation_data and protocol."""
    row = {
        "prompt": "p",
        "id": 9,
        "evaluation_data": {"expected": 1},
        "protocol": {"max_retries": 2},
        "metadata": {"level": "easy"},
        "topic": "maths",
    }
    (task,) = load_tasks(write_jsonl(tmp_path / "t.jsonl", [row]), query="prompt")
    assert task.id == "9" and task.evaluation_data == {"expected": 1}
    assert task.protocol.max_retries == 2
    assert task.metadata == {"level": "easy", "topic": "maths"}
    clash = {**row, "metadata": {"topic": "x"}}
    with pytest.raises(TaskSpecError, match=r"t.jsonl:1: metadata: column 'topic' is also a key"):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", [clash]), query="prompt")


@pytest.mark.parametrize("wrap", [False, True])
def test_a_json_file_holds_a_list_or_an_object_holding_one(tmp_path: Path, wrap: bool) -> None:
    data: Any = {"version": "1.1", "data": ROWS} if wrap else ROWS
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    tasks = load_tasks(path, query="question", id="qid", fields=ANSWERS)
    assert [(t.id, t.query, dict(t.evaluation_data)) for t in tasks] == [
        ("1", "2+2?", {"answer": "4"}),
        ("2", "3+3?", {"answer": "6"}),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"query": "one task"}', r"qa.json: expected a list of tasks, or an object holding one"),
        (
            '{"query": "a"}\n{"query": "b"}\n',
            r"qa.json:2: not valid JSON \(Extra data\); one task ",
        ),
        ('[{"query": "a"}, {"id": "b"}]', r"qa.json: row 2: query: missing"),
        ('[{"query": "a"}, 3]', r"qa.json: row 2: a task must be an object, got int"),
        ("[]", r"qa.json: no tasks in the file"),
        ("7", r"qa.json: expected a list of tasks, got int"),
    ],
)
def test_json_errors_name_the_file_and_row(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "qa.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TaskSpecError, match=message):
        load_tasks(path)


def test_a_mapped_row_without_a_column_names_row_field_and_what_it_has(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [ROWS[0], {"question": "q", "qid": 3}])
    with pytest.raises(
        TaskSpecError,
        match=r"qa.jsonl:2: evaluation_data: missing \(no column 'answer'; the row has question, qid\)",
    ):
        load_tasks(path, query="question", fields=ANSWERS)
    write_jsonl(path, [{**ROWS[0], "question": ""}])
    with pytest.raises(TaskSpecError, match=r"qa.jsonl:1: query: missing \(column 'question' is"):
        load_tasks(path, query="question")
    write_jsonl(path, [{**ROWS[0], "qid": 1.5}])
    with pytest.raises(TaskSpecError, match=r"qa.jsonl:1: id: must be a string or an integer"):
        load_tasks(path, query="question", id="qid")


# --- CSV and TSV ------------------------------------------------------------------------------


def test_a_csv_with_a_bom_reads_query_and_id_columns_and_keeps_strings(tmp_path: Path) -> None:
    """Default mapping: column query (required) and id; the rest into metadata, as strings."""
    path = tmp_path / "tasks.csv"
    path.write_bytes('\ufeffquery,id,answer\n2+2?,007,4\n\n"a\nb",8,x\n'.encode())
    tasks = load_tasks(path)
    assert tasks[0] == Task(query="2+2?", id="007", metadata={"answer": "4"})
    assert (tasks[1].query, tasks[1].id) == ("a\nb", "8")


def test_a_csv_with_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("question,qid,answer,why,source\nq1,1,4,sum,book\n", encoding="utf-8")
    (task,) = load_tasks(
        path, query="question", id="qid", fields={"evaluation_data": ["answer", "why"]}
    )
    assert task == Task(
        query="q1",
        id="1",
        evaluation_data={"answer": "4", "why": "sum"},
        metadata={"source": "book"},
    )


def test_a_tsv_is_tab_separated(tmp_path: Path) -> None:
    path = tmp_path / "qa.tsv"
    path.write_text("query\tanswer\nhow, really?\t4\n", encoding="utf-8")
    assert load_tasks(path)[0].query == "how, really?"


@pytest.mark.parametrize(
    ("content", "options", "message"),
    [
        # a quoted value spanning lines 2-3: the next row starts on line 4
        ('question,answer\n"a\nb",1\n,2\n', {"query": "question"},
         r"^\S*tasks.csv:4: query: missing \(column 'question' is empty\)$"),
        ("question,answer\nq,1\n", {},
         r"tasks.csv: query: no column 'query' \(columns: question, answer\); name the query's"),
        ("question,answer\nq,1\n", {"query": "question", "fields": {"user_data": ["persona"]}},
         r"tasks.csv: user_data: no column 'persona' \(columns: question, answer\)$"),
        ("query,answer\nq,1,extra\n", {}, r"tasks.csv:2: 3 values for 2 columns"),
        ("query,answer,query\nq,1,2\n", {}, r"tasks.csv:1: column 'query' appears twice"),
        ("query,id\na,x\nb,x\n", {}, r"tasks.csv: tasks 1 and 2: task id 'x' appears twice"),
        ("query,id\n", {}, r"tasks.csv: no tasks in the file \(a header row"),
        ("", {}, r"tasks.csv: no tasks in the file"),
        (b"query\nok\n\xff\xfe\n", {}, r"tasks.csv:3: not UTF-8 text"),
    ],
)  # fmt: skip
def test_csv_errors_name_the_file_line_and_field(
    tmp_path: Path, content: str | bytes, options: dict[str, Any], message: str
) -> None:
    path = tmp_path / "tasks.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(TaskSpecError, match=message):
        load_tasks(path, **options)


# --- mapping arguments and the CLI helper -----------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fields": {"answer": "x"}}, r"fields: 'answer' is not one of environment_data"),
        ({"fields": {"query": "x"}}, r"name the query column with query="),
        ({"query": ""}, r"query= must be a column name"),
        ({"fields": {"metadata": [1]}}, r"fields: metadata: column names must be strings"),
    ],
)
def test_a_bad_mapping_is_refused_at_once(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(TaskSpecError, match=message):
        iter_tasks(tmp_path / "not-read.jsonl", **options)


def test_parse_field_options_builds_load_tasks_keywords(tmp_path: Path) -> None:
    options = parse_field_options(
        "question", "qid", ["evaluation_data=answer, why", "evaluation_data=source", "metadata="]
    )
    assert options == {
        "query": "question",
        "id": "qid",
        "fields": {"evaluation_data": ["answer", "why", "source"], "metadata": []},
    }
    assert parse_field_options(None, None, []) == {"query": None, "id": None, "fields": None}
    path = write_jsonl(tmp_path / "qa.jsonl", ROWS)
    (task, _) = load_tasks(path, **parse_field_options("question", None, ["user_data=source"]))
    assert task.user_data == {"source": "book"} and task.metadata == {"qid": 1, "answer": "4"}
    for spec, message in [
        ("answer", "expected FIELD=COLUMN"),
        ("answers=a", "FIELD one of environment_data"),
        ("query=question", "with --query-field"),
    ]:
        with pytest.raises(TaskSpecError, match=f"--field {spec}: .*{message}"):
            parse_field_options(None, None, [spec])


# --- sources that are not files ---------------------------------------------------------------


def test_a_plain_directory_is_not_a_task_source(tmp_path: Path) -> None:
    with pytest.raises(TaskSpecError, match=r"tmp\S*: a directory, not a task file"):
        load_tasks(tmp_path)
    with pytest.raises(TaskSpecError, match=r"split= is for Hugging Face datasets"):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", ROWS), split="test")


def test_asynceval_and_a_csv_leave_datasets_unimported(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("query\nq\n", encoding="utf-8")
    script = (
        "import sys, asynceval\n"
        f"assert asynceval.load_tasks({str(path)!r})[0].query == 'q'\n"
        "print('datasets' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    assert asynceval.load_tasks is load_tasks


def test_without_datasets_an_hf_source_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(TaskSpecError, match=r"hf:gsm8k: .*pip install 'asynceval\[hf\]'"):
        load_tasks("hf:gsm8k")


def test_hf_sources_name_dataset_config_and_split(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    calls: list[tuple[Any, ...]] = []

    def load_dataset(name: str, config: str | None, split: str | None) -> Any:
        calls.append((name, config, split))
        return datasets.Dataset.from_list([{"question": "q", "answer": 4}])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    tasks = load_tasks("hf:openai/gsm8k:main@test[:1]", query="question", fields=ANSWERS)
    assert tasks == [Task(query="q", evaluation_data={"answer": 4})]
    load_tasks("hf:squad", query="question", split="validation")
    assert calls == [("openai/gsm8k", "main", "test[:1]"), ("squad", None, "validation")]
    with pytest.raises(TaskSpecError, match=r"hf:squad@a: split 'b' given too"):
        load_tasks("hf:squad@a", split="b")
    with pytest.raises(TaskSpecError, match=r"hf:@x: expected hf:NAME\[:CONFIG\]\[@SPLIT\]"):
        load_tasks("hf:@x")
    with pytest.raises(TaskSpecError, match=r"hf:gsm8k@v1@test: expected hf:NAME\[:CONFIG\]"):
        load_tasks("hf:gsm8k@v1@test")
    assert len(calls) == 2  # refused before anything is loaded


def test_iter_tasks_loads_a_dataset_at_once_and_reads_its_rows_lazily(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The load (a download, maybe) happens in the caller, before a run pulls its first task on
    the event loop; a missing column is said then too, before any row is read."""
    datasets = pytest.importorskip("datasets")
    loads: list[str] = []

    def load_dataset(name: str, config: str | None, split: str | None) -> Any:
        loads.append(name)
        return datasets.Dataset.from_list([{"question": "q1"}, {"question": "q2"}])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    tasks = iter_tasks("hf:gsm8k", query="question")
    assert loads == ["gsm8k"]
    assert next(tasks).query == "q1" and next(tasks).query == "q2"
    with pytest.raises(StopIteration):
        next(tasks)
    with pytest.raises(TaskSpecError, match=r"hf:other: query: no column 'prompt'"):
        iter_tasks("hf:other", query="prompt")
    assert loads == ["gsm8k", "other"]


def test_a_hub_error_is_one_line_naming_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")

    def load_dataset(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("Config name is missing.\nPick one among: main, socratic")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(TaskSpecError) as caught:
        load_tasks("hf:gsm8k")
    assert str(caught.value) == (
        "hf:gsm8k: cannot load the dataset (Config name is missing. Pick one among: main, socratic)"
    )


def test_a_saved_dataset_directory(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "qa"))
    tasks = load_tasks(tmp_path / "qa", query="question", id="qid", fields=ANSWERS)
    assert tasks[1] == Task(
        query="3+3?", id="2", evaluation_data={"answer": "6"}, metadata={"source": "web"}
    )
    with pytest.raises(TaskSpecError, match=r"qa: query: no column 'query' \(columns: question, "):
        load_tasks(tmp_path / "qa")
    with pytest.raises(TaskSpecError, match=r"qa@test: a single dataset with no split 'test'"):
        load_tasks(f"{tmp_path / 'qa'}@test", query="question")


def test_a_saved_dataset_dict_needs_a_split_when_it_holds_several(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    splits = {
        "train": datasets.Dataset.from_list(ROWS),
        "test": datasets.Dataset.from_list(
            [{"question": "t?", "qid": 9, "answer": "", "source": ""}]
        ),
    }
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "dd"))
    datasets.DatasetDict({"only": splits["train"]}).save_to_disk(str(tmp_path / "one"))
    where = str(tmp_path / "dd")
    assert [t.id for t in load_tasks(f"{where}@test", query="question", id="qid")] == ["9"]
    assert len(load_tasks(where, query="question", id="qid", split="train")) == 2
    assert len(load_tasks(tmp_path / "one", query="question", id="qid")) == 2  # the sole split
    with pytest.raises(
        TaskSpecError, match=r"dd: holds splits train, test; pick one with \S+@SPLIT"
    ):
        load_tasks(where, query="question")
    with pytest.raises(TaskSpecError, match=r"dd@dev: no split 'dev' \(splits: train, test\)"):
        load_tasks(f"{where}@dev", query="question")
    bad = datasets.DatasetDict({"train": datasets.Dataset.from_list([{"question": None}])})
    bad.save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(TaskSpecError, match=r"bad: row 1: query: missing \(column 'question' is"):
        load_tasks(tmp_path / "bad", query="question")


def test_a_csv_holds_long_values_json_task_fields_and_spaced_headers(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    long_query = "x" * 300_000  # above the csv module's 128 KiB default field limit
    path.write_text(
        "id, query, metadata\nt1," + long_query + ',"{""source"": ""book""}"\n', encoding="utf-8"
    )
    limit = csv.field_size_limit()
    (task,) = load_tasks(path)
    assert task.id == "t1" and task.query == long_query
    paused = iter_tasks(path)
    assert next(paused).query == long_query
    assert csv.field_size_limit() == limit  # a process-wide setting, left as it was
    assert task.metadata == {"source": "book"}
    path.write_text("query,metadata\nq,not json\n")
    with pytest.raises(TaskSpecError, match=r"long.csv:2: metadata: must hold a JSON object"):
        load_tasks(path)
