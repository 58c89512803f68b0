"""A repetition's context carried into the thread pools its code submits to, while runs go on.

A repetition's LLM calls find its budget, its usage counter, its call journal and its events
through context variables. Threads the engine starts, `asyncio.to_thread` and anyio's
`to_thread.run_sync` copy the context; a `concurrent.futures.ThreadPoolExecutor` does not, and
neither does `loop.run_in_executor(None, ...)` (which submits to one). So while at least one run
is in progress, `ThreadPoolExecutor.submit` is wrapped, the way OpenTelemetry's threading
instrumentation does it: a function submitted from inside a repetition runs in a copy of the
submitter's context (`contextvars.copy_context().run`); one submitted from anywhere else runs as
before, untouched. The wrapper is installed when the first run starts and removed when the last
one ends (counted, thread-safe): `ThreadPoolExecutor.submit` is then exactly what it was. If
other code wrapped `submit` again in the meantime, its wrapper is left in place (removing ours
would drop theirs); ours then only forwards.

Not covered: threads started by hand (`threading.Thread`) and executors whose `submit` does not
reach `ThreadPoolExecutor.submit`. Their sync calls are tied to the run instead (`run_scope`:
the run's budget, a usage counter of the run's own, its events file; one WARNING at its end),
when one run is in progress (see `asynceval.runtime._runs` and the cost guide).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .. import events
from ..funnel import UsageCounter, track_usage
from ..runtime import RunInProgress, run_in_progress
from .context import current_context

_lock = threading.Lock()
_runs = 0  # runs in progress that asked for the wrapper
_original: Callable[..., Future[Any]] | None = None  # what `submit` was before it
_buried = False  # other code wrapped ours: it stays in their chain (and keeps forwarding)


def _submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`ThreadPoolExecutor.submit`, with the submitter's context when it is a repetition's."""
    original = _original
    assert original is not None  # set before this is installed, never unset while it is
    if current_context() is not None:
        return original(self, contextvars.copy_context().run, fn, *args, **kwargs)
    return original(self, fn, *args, **kwargs)


_submit.__wrapped__ = ThreadPoolExecutor.submit  # type: ignore[attr-defined]
_submit.__doc__ = ThreadPoolExecutor.submit.__doc__


@contextlib.contextmanager
def executors_carry_context() -> Iterator[None]:
    """While in it (a run), functions submitted to thread pools from inside a repetition run in
    its context (see the module)."""
    global _runs, _original, _buried
    with _lock:
        if _runs == 0 and not _buried and ThreadPoolExecutor.submit is not _submit:
            _original = ThreadPoolExecutor.submit
            ThreadPoolExecutor.submit = _submit  # type: ignore[method-assign,assignment]
        _runs += 1
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and not _buried:
                if ThreadPoolExecutor.submit is _submit:
                    assert _original is not None  # (kept: a submit may be reading it)
                    ThreadPoolExecutor.submit = _original  # type: ignore[method-assign]
                else:
                    _buried = True


def carrying() -> bool:
    """Whether `ThreadPoolExecutor.submit` is wrapped now."""
    return ThreadPoolExecutor.submit is _submit


class RunScope:
    """What a run's threads without its context did: the run as the runtime knows it, and the
    usage of its calls made outside any repetition."""

    __slots__ = ("run", "usage")

    def __init__(self, run_id: str) -> None:
        self.run = RunInProgress(run_id)
        self.usage = UsageCounter()

    def warn(self) -> None:
        """The one WARNING of a run some of whose calls came from threads without a
        repetition's context (none if none did)."""
        if self.run.unattributed:
            usage = self.usage.as_dict()
            events.calls_outside_repetitions(calls=usage["llm_calls"], cost_usd=usage["cost_usd"])


@contextlib.contextmanager
def run_scope(run_id: str) -> Iterator[RunScope]:
    """Around a run, inside the scopes it binds (budget, events, runtime): thread pools carry
    their repetition's context, the run is registered as in progress, and calls of the run made
    outside any repetition count into the scope's usage."""
    scope = RunScope(run_id)
    with executors_carry_context(), track_usage(scope.usage), run_in_progress(scope.run):
        yield scope
