"""One run's use of a Dask cluster (the engine's `Session`): its repetitions go out in batches,
the workers' event lines come back into the caller's events, and, with a cost budget, what the
cluster spent comes back into the run's `CostBudget` before `run_finished`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
from distributed import Client

from .. import events
from ._batches import Batcher
from ._budget import RunBudget
from ._worker import END_OF_EVENTS, flush_budget, flush_events

if TYPE_CHECKING:
    from ..engine.repetition import Unit

_FLUSH_WAIT_S = 5.0  # how long the end of a run waits for the workers' last events


class DaskSession:
    """One run's use of the cluster (the engine's `Session`)."""

    def __init__(
        self,
        client: Client,
        run_id: str,
        workers: int,
        capacity: int,
        batch_size: int,
        budget: RunBudget | None = None,
    ) -> None:
        self.client = client
        self.budget = budget
        self.run_id = run_id
        self.workers = workers
        self.capacity = capacity
        self.description: Mapping[str, Any] = {"backend": "dask", "workers": workers}
        self._ended: set[str] = set()
        self._all_ended = anyio.Event()
        self._expected: set[str] = set()
        self._flushed = False
        self._batches = Batcher(client, run_id, batch_size, lambda: scheduler_address(client))

    def on_event(self, event: tuple[float, Any]) -> None:
        """A worker's event line (or its end-of-events marker), written to our events sink."""
        _, message = event
        if isinstance(message, list | tuple) and message and message[0] == END_OF_EVENTS:
            self._ended.add(str(message[1]))
            if self._expected and self._expected <= self._ended:
                self._all_ended.set()
            return
        if isinstance(message, list | tuple):  # a batch of a worker's event lines
            for line in message:
                events.forward(str(line))
        else:
            events.forward(str(message))

    async def run(self, unit: Unit) -> dict[str, Any]:
        report = await self._batches.run(unit, time.monotonic() - unit.selected_at)
        if self.budget is not None:
            self.budget.saw(report)
        return report

    async def finish(self) -> None:
        """Stop batches still out (a run cancelled or failed), here and on the workers, and
        take the workers' last events."""
        await self._batches.aclose()
        await self.flush_events()

    async def flush_events(self) -> None:
        """Ask every worker for its end-of-events marker and wait (briefly) for all of them, so
        the events file holds the workers' last lines before the run's `run_finished`; and with
        a cost budget, bring the cluster's spending into the run's `CostBudget` first."""
        if self._flushed:
            return
        self._flushed = True
        if self.budget is not None:
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(_FLUSH_WAIT_S),
                contextlib.suppress(Exception),  # the scheduler may be gone
            ):
                await self.client.run(flush_budget, self.run_id, on_error="ignore")
                await self.budget.take_figures()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_FLUSH_WAIT_S):
            replies = await self.client.run(flush_events, self.run_id, on_error="ignore")
            self._expected = {str(address) for address in replies.values() if address}
            if self._expected <= self._ended:
                return
            await self._all_ended.wait()


def scheduler_address(client: Client) -> str:
    return str(getattr(client.scheduler, "address", "?"))
