"""Where a run's repetitions execute: in this process (no backend), or elsewhere.

The caller's run keeps the queue, the results file, resume, callbacks, progress and the summary
whatever the backend; a backend only runs whole repetitions and hands their reports back. The
one shipped is `asynceval.distributed.DaskBackend`; this protocol is what the engine needs of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import Settings
    from ..limits import CostBudget
    from .benchmark import Benchmark
    from .repetition import Unit


class Session(Protocol):
    """One run's use of a backend."""

    @property
    def capacity(self) -> int:
        """How many repetitions may be outstanding at once (the run never has more)."""
        ...

    @property
    def description(self) -> Mapping[str, Any]:
        """What `run_started` and the results header say of it (e.g. backend, workers)."""
        ...

    async def run(self, unit: Unit) -> dict[str, Any]:
        """Run every attempt of one repetition; its report. Raises only for the run's end (the
        backend is gone, or the run is cancelled)."""
        ...

    async def flush_events(self) -> None:
        """Bring in the events written elsewhere so far (called before `run_finished`), and the
        cost budget's figures (what was spent elsewhere) into the run's `CostBudget`."""
        ...


class Backend(Protocol):
    """Something that can open a `Session` for a run."""

    def session(
        self,
        bench: Benchmark,
        settings: Settings,
        max_concurrent_tasks: int,
        run_key: str | None = None,
        budget: CostBudget | None = None,
    ) -> AbstractAsyncContextManager[Session]:
        """`run_key` names the run across processes (its results file's absolute path): a
        resumed run has the same key as the run it continues, None when there is no file.

        `budget` is the run's cost budget, if it has one: every call the backend makes is
        reserved against its `limit` (one budget for all its processes); the session sets
        `budget.exhausted` as soon as it is (the run then starts no new repetition), and
        `flush_events` brings what was spent into it."""
        ...
