"""Queues in a run: a priority queue starts the highest priority first, and a queue that raises
stops new starts, lets the repetitions in flight finish and be written, then raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asynceval import (
    Benchmark,
    BenchmarkCallback,
    PriorityQueue,
    SequentialQueue,
    Task,
    TaskProtocol,
)
from asynceval.engine import read_records

from ._benches import Agents


class ScoreBomb(SequentialQueue):
    def on_task_complete(self, task: Task, report: Any) -> None:
        if task.id == "2":
            raise ValueError("the queue's own bug")


async def test_a_broken_queue_stops_new_starts_lets_in_flight_finish_then_raises(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    queue = ScoreBomb(Task(query=i, id=str(i)) for i in range(50))
    with pytest.raises(ValueError, match="the queue's own bug"):
        await Agents(max_concurrent_tasks=4).run(queue=queue, results_path=path)
    records, damaged = read_records(path)
    finished = [r for r in records if r.get("type") != "header"]
    assert damaged == 0 and 3 <= len(finished) < 50  # in-flight ones finished and are on disk


async def test_priority_queue_runs_the_highest_priority_first() -> None:
    order: list[str] = []

    class Order(BenchmarkCallback):
        def on_task_start(self, benchmark: Benchmark, task: Task) -> None:
            order.append(task.id)

    tasks = [
        Task(query=i, id=name, protocol=TaskProtocol(priority=priority))
        for i, (name, priority) in enumerate([("low", 0), ("high", 9), ("mid", 5), ("mid2", 5)])
    ]
    await Agents(max_concurrent_tasks=1, callbacks=[Order()]).run(tasks, queue=PriorityQueue)
    assert order == ["high", "mid", "mid2", "low"]
