"""SyncAgent: a sync agent object (any framework with a blocking `run(query)`) as an engine agent.

The engine awaits agents; a blocking `run` called on the event loop would stall every other
repetition. `SyncAgent` runs it in one of the engine's worker threads instead (the run's thread
limiter, with abandoned-thread accounting when a repetition times out), and the sync code's LLM
calls go through `model.generate_sync(...)` into the same global controller as async code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import events
from ..engine.threads import call_maybe_async


class SyncAgent:
    """An async callable agent wrapping `obj`'s sync `method` (default `run`): `await agent(q)`.

    Return it from `Benchmark.setup_agents`; the engine then registers it by its key in
    `agents_by_name`, so its `gather_traces()` (calls, errors, last error) and `gather_config()`
    (the wrapped object's type) land in the report. `name` defaults to the wrapped object's
    `name` attribute if it is a non-empty string, else its class name; while the method runs,
    `name` is bound as the events' `agent`, so LLM calls that name no agent themselves are
    attributed to it.

    Edge cases: the method runs in a worker thread only inside an engine run (elsewhere it runs
    inline, as `call_maybe_async` does); an async method is awaited on the event loop instead.
    Errors raised by the method propagate unchanged, so an `AgentError` makes the repetition's
    status agent_error. A cancelled call (timeout) is not counted as an error; its thread runs on
    until the method returns. Wrap a fresh object per repetition: most agent objects keep state
    (memory, step counters) and are not safe to run in two threads at once.
    """

    def __init__(self, obj: Any, *, method: str = "run", name: str | None = None) -> None:
        bound = getattr(obj, method, None)
        if not callable(bound):
            raise TypeError(f"{type(obj).__name__} object has no callable {method}() method")
        self.obj = obj
        self.method = method
        own_name = getattr(obj, "name", None)
        self.name: str = name or (
            own_name if isinstance(own_name, str) and own_name else type(obj).__name__
        )
        self._call: Callable[..., Any] = bound
        self.calls = 0
        self.errors = 0
        self.last_error: str | None = None

    async def __call__(self, query: Any) -> Any:
        """Run the wrapped method on `query` (in a worker thread) and return its result."""
        self.calls += 1
        try:
            with events.bind_context(agent=self.name):
                return await call_maybe_async(self._call, query)
        except Exception as exc:
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            raise

    def gather_traces(self) -> dict[str, Any]:
        """How often the agent ran and failed in this repetition, and its last error (or None)."""
        return {
            "name": self.name,
            "calls": self.calls,
            "errors": self.errors,
            "last_error": self.last_error,
        }

    def gather_config(self) -> dict[str, Any]:
        """The wrapped object's type (module.qualname), the method run, and the agent's name."""
        cls = type(self.obj)
        return {
            "name": self.name,
            "type": f"{cls.__module__}.{cls.__qualname__}",
            "method": self.method,
        }

    def __repr__(self) -> str:
        return f"SyncAgent({type(self.obj).__name__}.{self.method}, name={self.name!r})"
