"""TaskContext: the running repetition's deadline, reachable from any code it runs.

`current_context()` returns it from async code and from sync code in the engine's worker threads
alike (anyio copies context variables into them). Sync code cannot be cancelled from outside, so
long loops call `check_timeout()` at checkpoints to stop in time.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any

from .._scoped import Scoped
from ..errors import TaskTimeoutError
from .status import TerminationReason
from .task import Task


class TaskContext:
    """Deadline and bookkeeping of one attempt of one task repetition."""

    __slots__ = (
        "_started",
        "attempt",
        "evaluation_errors",
        "evaluation_exceptions",
        "failed_calls",
        "repeat_idx",
        "sent_calls",
        "started_tasks",
        "task",
        "termination_reason",
        "timeout_s",
    )

    def __init__(
        self, *, task: Task, repeat_idx: int, timeout_s: float | None, attempt: int = 1
    ) -> None:
        self.task = task
        self.repeat_idx = repeat_idx
        self.timeout_s = timeout_s
        self.attempt = attempt
        self.termination_reason: TerminationReason | None = None
        self.evaluation_errors: list[dict[str, Any]] = []
        self.evaluation_exceptions: list[BaseException] = []
        self.failed_calls: list[BaseException] = []
        # Calls that took a slot (by call_id), and asyncio tasks started, in this attempt: a
        # call cut short still counts; a task left running is cancelled at the attempt's end.
        self.sent_calls: set[Any] = set()
        self.started_tasks: list[Any] = []
        self._started = time.monotonic()

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def elapsed(self) -> float:
        """Seconds since this attempt started."""
        return time.monotonic() - self._started

    @property
    def deadline(self) -> float | None:
        """The `time.monotonic()` value at which the attempt times out, None without a timeout."""
        return None if self.timeout_s is None else self._started + self.timeout_s

    @property
    def remaining(self) -> float | None:
        """Seconds left before the timeout (never negative), None without a timeout."""
        return None if self.timeout_s is None else max(0.0, self.timeout_s - self.elapsed)

    @property
    def is_expired(self) -> bool:
        return self.timeout_s is not None and self.elapsed >= self.timeout_s

    def check_timeout(self) -> None:
        """Raise `TaskTimeoutError` if the deadline has passed; call it at checkpoints."""
        if self.timeout_s is not None:
            elapsed = self.elapsed
            if elapsed >= self.timeout_s:
                raise TaskTimeoutError(
                    f"task {self.task_id} ran past its {self.timeout_s:g} s timeout",
                    elapsed_s=elapsed,
                    timeout_s=self.timeout_s,
                )

    def record_failed_call(self, error: BaseException) -> None:
        """An LLM call failed for good inside a component that carried on without it (a judge
        panel's dimension): the repetition ends evaluation_failed, and `max_retries` may re-run
        it as it would a failed agent call."""
        self.failed_calls.append(error)

    def record_termination(self, reason: TerminationReason) -> None:
        """Say how the execution loop ended (the default loop does; custom loops should)."""
        self.termination_reason = TerminationReason(reason)


_current: ContextVar[TaskContext | None] = ContextVar("asynceval_task_context", default=None)


def current_context() -> TaskContext | None:
    """The context of the repetition this code runs in, or None outside the engine."""
    return _current.get()


def task_context(context: TaskContext) -> Scoped[TaskContext]:
    """A `with` block in which `current_context()` is `context` (one repetition attempt)."""
    return Scoped(_current, context)
