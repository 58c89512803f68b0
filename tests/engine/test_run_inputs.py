"""What a benchmark and its run refuse in what they are given: a max_concurrent_tasks that is
not a whole number of at least one, and a task id given twice (from a list, before anything runs;
from a lazy source, once the repeat is reached and the work in flight is recorded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asynceval import Task
from asynceval.engine import successful_pairs
from asynceval.errors import TaskSpecError

from ._benches import Agents


async def test_a_duplicate_task_id_in_a_list_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query=0, id="a"), Task(query=1, id="b"), Task(query=2, id="a")]
    with pytest.raises(TaskSpecError, match="tasks 0 and 2: task id 'a' appears twice"):
        await Agents(max_concurrent_tasks=4).run(tasks, results_path=path)
    assert not path.exists()  # nothing ran, not even the header


async def test_a_duplicate_id_from_a_lazy_source_is_raised_after_in_flight_work_is_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    tasks = iter([Task(query=0, id="a"), Task(query=1, id="b"), Task(query=2, id="a")])
    with pytest.raises(TaskSpecError, match="task id 'a' appears twice"):
        await Agents(max_concurrent_tasks=4).run(tasks, results_path=path)
    assert successful_pairs(path) == {("a", 0), ("b", 0)}


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "4", float("inf")])
def test_max_concurrent_tasks_must_be_a_whole_number_of_at_least_one(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"max_concurrent_tasks must be an integer >= 1, got "):
        Agents(max_concurrent_tasks=bad)
