"""What `Benchmark.run()` is given, checked and shaped before the run starts: the tasks (a list's
ids checked at once), the agent data for each task, and the queue that hands tasks out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError, TaskSpecError
from .queues import SequentialQueue, TaskQueue
from .task import Task, as_task, duplicate_message

TaskSource = Iterable[Task | Mapping[str, Any]]
QueueArg = TaskQueue | Callable[[TaskSource], TaskQueue] | None


def checked_ids(tasks: TaskSource | None) -> TaskSource | None:
    """Tasks given as a list: built and their ids checked before anything runs (a repeated id
    is one clear error); lazy sources are checked as they are pulled."""
    if not isinstance(tasks, Sequence):
        return tasks
    built = [as_task(item) for item in tasks]
    seen: dict[str, int] = {}
    for index, task in enumerate(built):
        if task.id in seen:
            raise TaskSpecError(duplicate_message(task.id, f"tasks {seen[task.id]} and {index}"))
        seen[task.id] = index
    return built


def agent_data_resolver(
    tasks: TaskSource | None, agent_data: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
) -> Callable[[Task], Mapping[str, Any]]:
    """The agent data for a task: none, one mapping shared by all, or a list with one entry per
    task of `tasks` (a list as `checked_ids` built it)."""
    if agent_data is None:
        return lambda task: {}
    if isinstance(agent_data, Mapping):
        shared = dict(agent_data)
        return lambda task: shared
    if tasks is None or not isinstance(tasks, Sequence):
        raise ConfigError("agent_data as a list (one per task) needs tasks as a list too")
    if len(agent_data) != len(tasks):
        raise ConfigError(f"agent_data has {len(agent_data)} entries for {len(tasks)} tasks")
    by_id = {as_task(task).id: dict(data) for task, data in zip(tasks, agent_data, strict=True)}
    return lambda task: by_id.get(task.id, {})


def make_queue(tasks: TaskSource | None, queue: QueueArg) -> TaskQueue:
    """The run's queue: the one given (then no tasks), one built from the tasks by the callable
    given, else a SequentialQueue over them."""
    if isinstance(queue, TaskQueue):
        if tasks is not None:
            raise ConfigError("pass tasks or a ready TaskQueue, not both")
        return queue
    if tasks is None:
        raise ConfigError("run() needs tasks (or a TaskQueue that holds them)")
    if queue is None:
        return SequentialQueue(tasks)
    built = queue(tasks)
    if not isinstance(built, TaskQueue):
        raise ConfigError(f"queue must build a TaskQueue, got {type(built).__name__}")
    return built
