"""Tasks and protocols: construction, validation, JSONL loading with line-numbered errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynceval.engine import Task, TaskProtocol, TimeoutAction, iter_tasks, load_tasks
from asynceval.errors import TaskSpecError


def test_a_task_without_an_id_gets_one_from_its_content() -> None:
    """Stable across runs and processes (resume pairs reports by it); any field changes it."""
    a, b = Task(query="q"), Task(query="q", id="")
    assert a.id == b.id and a.id.startswith("task-") and len(a.id) == 25
    assert Task.from_dict({"query": "q"}).id == a.id
    others = [
        Task(query="q2"),
        Task(query="q", evaluation_data={"expected": 1}),
        Task(query="q", protocol=TaskProtocol(max_retries=1)),
        Task(query="q", metadata={"difficulty": 1}),
    ]
    assert len({a.id, *(t.id for t in others)}) == 5


def test_derived_ids_are_the_same_in_another_process() -> None:
    import subprocess
    import sys

    script = "from asynceval import Task; print(Task(query={'x': [1, 2]}, metadata={'k': 'v'}).id)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == Task(query={"x": [1, 2]}, metadata={"k": "v"}).id


def test_two_tasks_with_the_same_content_and_no_id_are_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"query": "same"}\n{"query": "other"}\n{"query": "same"}\n')
    with pytest.raises(TaskSpecError, match=r"tasks 1 and 3: two tasks with the same content"):
        load_tasks(path)


def test_from_dict_builds_the_protocol_and_accepts_numeric_ids() -> None:
    task = Task.from_dict(
        {"id": 7, "query": "2+2?", "protocol": {"timeout_seconds": 3, "timeout_action": "extend"}}
    )
    assert task.id == "7"
    assert task.protocol == TaskProtocol(timeout_seconds=3, timeout_action=TimeoutAction.EXTEND)
    assert Task.from_dict(task.to_dict()) == task


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"id": "x"}, "query: missing"),
        ({"query": "q", "colour": "red"}, "colour: unknown field"),
        ({"query": "q", "protocol": {"timeout_seconds": -1}}, "timeout_seconds must be > 0"),
        ({"query": "q", "protocol": {"timeout_action": "wait"}}, "timeout_action must be one of"),
        ({"query": "q", "protocol": {"max_retries": -2}}, "max_retries must be >= 0"),
        ({"query": "q", "protocol": {"retries": 2}}, "protocol.retries: unknown field"),
        ({"query": "q", "metadata": [1]}, "metadata must be an object"),
        ({"query": "q", "id": ["x"]}, "id must be a string"),
    ],
)
def test_bad_task_dicts_say_which_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(TaskSpecError, match=message):
        Task.from_dict(data)


def test_jsonl_errors_name_the_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    lines = [
        json.dumps({"query": "a"}),
        "",
        json.dumps({"query": "b", "protocol": {"priority": "x"}}),
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TaskSpecError, match=r"tasks.jsonl:3: priority must be an integer"):
        load_tasks(path)
    path.write_text('{"query": "a"}\n{"query": \n')
    with pytest.raises(TaskSpecError, match=r"tasks.jsonl:2: not valid JSON"):
        load_tasks(path)


def test_duplicate_ids_in_a_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a", "query": 1}\n{"id": "a", "query": 2}\n')
    with pytest.raises(TaskSpecError, match="'a' appears twice"):
        load_tasks(path)


def test_iter_tasks_reads_lazily(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"query": "fine"}\nnot json\n')
    tasks = iter_tasks(path)
    assert next(tasks).query == "fine"  # the bad line is only met when reached
    with pytest.raises(TaskSpecError, match=":2:"):
        next(tasks)


def test_an_id_utf8_cannot_hold_is_refused_and_other_unicode_ids_are_kept() -> None:
    """A lone surrogate would be written as '?': the report would never match its task again."""
    with pytest.raises(TaskSpecError, match=r"id must be text UTF-8 can hold, got '\\ud800x'"):
        Task(query="q", id="\ud800x")
    assert Task(query="q", id="é-✓-😀").id == "é-✓-😀"
