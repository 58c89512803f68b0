"""The runs in progress in this process, for the calls that reach the funnel without their
run's context.

A run binds what its calls find through context variables (its budget, its events file, its
runtime, a usage counter of its own for calls made outside its repetitions) and registers here
while it goes on (`run_in_progress`). A sync call from a thread that carries no run's context
(a `threading.Thread` started by hand, an executor whose `submit` does not copy the context)
would otherwise go out unbudgeted and unaccounted; `run_for_thread` finds the run it belongs to:

- exactly one run in progress in the process: that run. The call is made in a copy of the
  run's own context, as a call of the run made outside any repetition: budgeted against the
  run's budget, counted in the run's usage (not in a repetition's), its events in the run's
  events file; not journaled (the journal replays calls within a repetition). The run says so
  in one WARNING at its end, with how to carry the context into such threads.
- several runs in progress: the call cannot be told apart. Under a budget (any of them has
  one) it is refused with `CostUnbounded`, since no budget can be chosen for it; else it goes
  out as a call made outside any run, as it would with no run in progress.
- none: nothing changes.

Threads that copy the context (the engine's, `asyncio.to_thread`, anyio's, and while a run is
in progress every `ThreadPoolExecutor`) never get here: their calls are their repetition's.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

from ..errors import CostUnbounded
from ..events import OUTSIDE_REPETITIONS_ADVICE
from ..limits import current_budget

T = TypeVar("T")


class RunInProgress:
    """One run while it goes on: its id, a copy of its context (`run_in_progress` takes it,
    inside the scopes the run binds) and how many calls from threads without its context it
    made (`unattributed`)."""

    __slots__ = ("_lock", "context", "run_id", "unattributed")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.context: contextvars.Context | None = None
        self.unattributed = 0
        self._lock = threading.Lock()

    def call(self, func: Callable[..., T], *args: object) -> T:
        """`func(*args)` in (a copy of) the run's context, counted as an unattributed call."""
        with self._lock:
            self.unattributed += 1
        context = self.context
        if context is None:  # its scopes are not bound yet: nothing to carry
            return func(*args)
        return context.copy().run(func, *args)

    def has_budget(self) -> bool:
        context = self.context
        return context is not None and context.run(current_budget) is not None


_current: ContextVar[RunInProgress | None] = ContextVar("asynceval_run", default=None)
_runs: list[RunInProgress] = []
_lock = threading.Lock()


@contextlib.contextmanager
def run_in_progress(run: RunInProgress) -> Iterator[RunInProgress]:
    """While in it, `run` is this context's run and is registered as in progress, with a copy
    of this context (taken before it is registered) for the calls that come without one."""
    token = _current.set(run)
    run.context = contextvars.copy_context()
    with _lock:
        _runs.append(run)
    try:
        yield run
    finally:
        with _lock:
            _runs.remove(run)
        _current.reset(token)


def current_run() -> RunInProgress | None:
    """The run this code belongs to (its context carries it), if any."""
    return _current.get()


def run_for_thread() -> RunInProgress | None:
    """The run a call that carries no run's context belongs to (see the module), or None: the
    call carries its run's context already, or no single run can be chosen and none has a
    budget. `CostUnbounded` when several runs are in progress and one has a budget."""
    if _current.get() is not None:
        return None
    with _lock:
        runs = tuple(_runs)
    if len(runs) == 1:
        return runs[0]
    if runs and any(run.has_budget() for run in runs):
        raise CostUnbounded(
            f"an LLM call came from a thread that carries no run's context while {len(runs)} "
            "runs are in progress, one of them under a budget (--max-cost), so its budget "
            f"cannot be known and it was not sent: {OUTSIDE_REPETITIONS_ADVICE}"
        )
    return None
