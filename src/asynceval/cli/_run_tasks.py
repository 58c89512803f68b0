"""`asynceval run`'s tasks: a stream of --tasks SOURCE or the benchmark's own, checked at once,
counted for the progress display and described for the manifest."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from ..engine import Benchmark, Task
from ..engine.datasets import TaskStream, open_tasks, parse_field_options, tasks_source_info
from ..engine.run_paths import task_set_of
from ..engine.task import as_task, duplicate_message
from ..errors import TaskSpecError
from ._errors import CLIError, describe


def tasks_of(args: argparse.Namespace, bench: Benchmark) -> Iterable[Task | Mapping[str, Any]]:
    """The run's tasks: a stream of --tasks SOURCE (its first rows checked now), else the
    benchmark's own, every one checked now (a repeated id or a task with no query is one line,
    before anything is written)."""
    if args.tasks is None and (args.query_field or args.id_field or args.field):
        raise CLIError("--query-field, --id-field and --field map the columns of --tasks SOURCE")
    if args.tasks is not None:
        try:
            mapping = parse_field_options(args.query_field, args.id_field, args.field)
            return open_tasks(args.tasks, **mapping)
        except FileNotFoundError:
            raise CLIError(f"--tasks {args.tasks}: no such file") from None
        except TaskSpecError as exc:
            raise CLIError(str(exc)) from None
        except OSError as exc:
            raise CLIError(f"--tasks {args.tasks}: {exc.strerror or exc}") from None
    try:
        tasks = bench.default_tasks()
    except Exception as exc:  # the target's own code: one line, like an error at import
        raise CLIError(f"{args.target}: default_tasks() failed: {describe(exc)}") from None
    if tasks is None:
        raise CLIError(
            f"{args.target}: the benchmark has no tasks of its own; pass --tasks SOURCE "
            "(or define default_tasks() on it)"
        )
    if isinstance(tasks, str | bytes | Mapping) or not isinstance(tasks, Iterable):
        raise CLIError(
            f"{args.target}: default_tasks() returned {type(tasks).__name__}, not a list of "
            "tasks (Task objects or dicts of Task fields)"
        )
    try:
        built = _checked(tasks)
    except TaskSpecError as exc:
        raise CLIError(f"{args.target}: default_tasks(): {exc}") from None
    except Exception as exc:  # a generator of the target's raising as it is read
        raise CLIError(f"{args.target}: default_tasks() failed: {describe(exc)}") from None
    if not built:
        raise CLIError(f"{args.target}: default_tasks() returned no task; pass --tasks SOURCE")
    return built


def _checked(tasks: Iterable[Any]) -> list[Task]:
    """Every task built and its id checked (a repeated id names both places)."""
    built: list[Task] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(tasks):
        try:
            task = as_task(item)
        except TaskSpecError as exc:
            raise TaskSpecError(f"task {index}: {exc}") from None
        if task.id in seen:
            raise TaskSpecError(duplicate_message(task.id, f"tasks {seen[task.id]} and {index}"))
        seen[task.id] = index
        built.append(task)
    return built


def total_of(tasks: Iterable[Any], bench: Benchmark) -> int | None:
    """The pairs (task, repeat) of the run's tasks, for the progress display; None if unknown."""
    if isinstance(tasks, TaskStream):
        count = tasks.count()
        return None if count is None else count * bench.n_task_repeats
    return len(tasks) * bench.n_task_repeats if hasattr(tasks, "__len__") else None  # type: ignore[arg-type]


def tasks_record(tasks: Iterable[Any]) -> dict[str, Any]:
    """What the manifest records of the run's tasks: a file's source, hash and mapping; the
    benchmark's own tasks by their count and ids."""
    if isinstance(tasks, TaskStream):
        try:
            return tasks_source_info(tasks)
        except OSError as exc:
            raise CLIError(f"--tasks {tasks.source}: {exc.strerror or exc}") from None
    return {"kind": "default", **(task_set_of(tasks) or {})}
