"""Task queues: which task runs next, chosen when a slot opens, never all up front.

The scheduler asks `next_task()` each time it has room for another task, so a queue can choose
with every result known so far, and an endless or huge iterable is never materialized (except by
`PriorityQueue`, which must see every task to sort them). After each repetition the scheduler calls
`on_task_complete(task, report)`, then `should_continue()`; once that says False, no new task starts
and the ones in flight finish.
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .task import Task, as_task


class TaskQueue(ABC):
    """Base of every queue; subclass it and implement `next_task`."""

    @abstractmethod
    def next_task(self) -> Task | None:
        """The task to start now, or None when the queue will give no more."""

    def on_task_complete(self, task: Task, report: Mapping[str, Any]) -> None:  # noqa: B027
        """One repetition of `task` finished with `report` (called once per repetition)."""

    def should_continue(self) -> bool:
        """Whether new tasks may still start; checked after every completed repetition."""
        return True


class SequentialQueue(TaskQueue):
    """Tasks in the order given, pulled lazily from any iterable (a list, a generator, a file)."""

    def __init__(self, tasks: Iterable[Task | Mapping[str, Any]]) -> None:
        self._tasks: Iterator[Task | Mapping[str, Any]] = iter(tasks)

    def next_task(self) -> Task | None:
        item = next(self._tasks, None)
        return None if item is None else as_task(item)


class PriorityQueue(TaskQueue):
    """Highest `protocol.priority` first; equal priorities keep their given order."""

    def __init__(self, tasks: Iterable[Task | Mapping[str, Any]]) -> None:
        counter = itertools.count()
        self._heap = [
            (-task.protocol.priority, next(counter), task) for task in map(as_task, tasks)
        ]
        heapq.heapify(self._heap)

    def next_task(self) -> Task | None:
        return heapq.heappop(self._heap)[2] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
