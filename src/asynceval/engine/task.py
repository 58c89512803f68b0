"""Tasks: what to evaluate (`Task`) and how the engine runs it (`TaskProtocol`).

Tasks come as `Task` objects or as dicts of Task fields (`Task.from_dict`); a bad dict raises
`TaskSpecError` naming the field. Files and datasets of tasks are read by `datasets.load_tasks`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from ..errors import TaskSpecError


class TimeoutAction(StrEnum):
    """What the engine does when a repetition times out."""

    SKIP = "skip"  # record the timeout and move on
    RETRY = "retry"  # run it once more with the same timeout
    EXTEND = "extend"  # run it once more with double the timeout


@dataclass(frozen=True)
class TaskProtocol:
    """How the engine runs a task: its timeout and what to do then, retries, priority, tags.

    `timeout_seconds` None means the run's TASK_TIMEOUT (or none). `max_retries` re-runs a
    repetition that failed for infrastructure reasons (an LLM call that failed for good, or an
    unknown error), with exponential backoff.
    """

    timeout_seconds: float | None = None
    timeout_action: TimeoutAction = TimeoutAction.SKIP
    max_retries: int = 0
    priority: int = 0
    tags: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        timeout = self.timeout_seconds
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise TaskSpecError(f"timeout_seconds must be a number, got {timeout!r}")
            if not (timeout > 0 and math.isfinite(timeout)):
                raise TaskSpecError(f"timeout_seconds must be > 0, got {timeout!r}")
        try:
            if type(self.timeout_action) is not TimeoutAction:  # a member already: as it is
                object.__setattr__(self, "timeout_action", TimeoutAction(self.timeout_action))
        except ValueError:
            choices = ", ".join(action.value for action in TimeoutAction)
            raise TaskSpecError(
                f"timeout_action must be one of {choices}, got {self.timeout_action!r}"
            ) from None
        for name in ("max_retries", "priority"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TaskSpecError(f"{name} must be an integer, got {value!r}")
        if self.max_retries < 0:
            raise TaskSpecError(f"max_retries must be >= 0, got {self.max_retries}")
        if not _is_mapping(self.tags):
            raise TaskSpecError(f"tags must be an object, got {self.tags!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskProtocol:
        return cls(**_known(cls, data, "protocol."))

    def to_dict(self) -> dict[str, Any]:
        return {
            "timeout_seconds": self.timeout_seconds,
            "timeout_action": self.timeout_action.value,
            "max_retries": self.max_retries,
            "priority": self.priority,
            "tags": dict(self.tags),
        }


def content_id(task: Task) -> str:
    """A stable id for a task given none: a digest of everything else in it, so the same task
    gets the same id in every run (what `--resume` and `asynceval report` pair reports by)."""
    content = {
        "query": task.query,
        "environment_data": task.environment_data,
        "user_data": task.user_data,
        "evaluation_data": task.evaluation_data,
        "metadata": task.metadata,
        "protocol": task.protocol.to_dict(),
    }
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=repr)
    return "task-" + hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:20]


@dataclass(frozen=True)
class Task:
    """One item to evaluate; the data dicts are free-form. `id` is a string; left out (or empty),
    it is derived from the task's content (`content_id`): stable across runs, so resuming a run of
    tasks without ids runs nothing twice, and two tasks with the same content get the same id."""

    query: Any
    id: str = ""
    environment_data: Mapping[str, Any] = field(default_factory=dict)
    user_data: Mapping[str, Any] = field(default_factory=dict)
    evaluation_data: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    protocol: TaskProtocol = field(default_factory=TaskProtocol)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise TaskSpecError(f"id must be a string, got {self.id!r}")
        if not self.id.isascii():
            try:  # a lone surrogate cannot be written, so a resume could never find the task
                self.id.encode("utf-8")
            except UnicodeEncodeError:
                raise TaskSpecError(f"id must be text UTF-8 can hold, got {self.id!r}") from None
        for name in ("environment_data", "user_data", "evaluation_data", "metadata"):
            if not _is_mapping(getattr(self, name)):
                raise TaskSpecError(f"{name} must be an object, got {getattr(self, name)!r}")
        if isinstance(self.protocol, Mapping):
            object.__setattr__(self, "protocol", TaskProtocol.from_dict(self.protocol))
        elif not isinstance(self.protocol, TaskProtocol):
            raise TaskSpecError(f"protocol must be an object, got {self.protocol!r}")
        if not self.id:
            object.__setattr__(self, "id", content_id(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """A Task from a dict of its fields; `query` is required, unknown keys are refused."""
        if not isinstance(data, Mapping):
            raise TaskSpecError(f"a task must be an object, got {type(data).__name__}")
        if "query" not in data:
            raise TaskSpecError("query: missing (every task needs one)")
        values = _known(cls, data, "")
        if "id" in values and isinstance(values["id"], int) and not isinstance(values["id"], bool):
            values["id"] = str(values["id"])  # ids from JSON files are often numbers
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "id": self.id,
            "environment_data": dict(self.environment_data),
            "user_data": dict(self.user_data),
            "evaluation_data": dict(self.evaluation_data),
            "metadata": dict(self.metadata),
            "protocol": self.protocol.to_dict(),
        }


def duplicate_message(task_id: str, where: str) -> str:
    """The error for two tasks with one id; says what to do when the id was derived."""
    if task_id.startswith("task-"):
        return (
            f"{where}: two tasks with the same content and no id (both {task_id}); "
            "give them ids to run both"
        )
    return f"{where}: task id {task_id!r} appears twice"


def as_task(item: Task | Mapping[str, Any]) -> Task:
    """A Task from a Task or a dict of Task fields."""
    return item if isinstance(item, Task) else Task.from_dict(item)


def _known(cls: type, data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise TaskSpecError(
            f"{prefix}{unknown[0]}: unknown field (known: {', '.join(sorted(names))})"
        )
    return dict(data)


def _is_mapping(value: Any) -> bool:
    """isinstance(value, Mapping), a dict's answer without the ABC check (per task built)."""
    return type(value) is dict or isinstance(value, Mapping)
