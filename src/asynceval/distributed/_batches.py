"""Repetitions go to the cluster in small batches: one Dask task per batch, not per repetition.

A Dask task costs the scheduler and the worker about a millisecond of CPU each, more than a
repetition of one short LLM call costs the engine; batching divides that by the batch size.
Repetitions the engine starts within `LINGER_S` of each other (a run's start, or the slots a
finished batch frees) share a batch, up to `size`; each batch runs its repetitions concurrently
on one worker's loop and returns their reports together, so a report is recorded when its batch
completes (at most as late as the batch's slowest repetition). Each repetition carries the
W3C trace context of the run's span when OpenTelemetry is on, so that the worker's spans join
the caller's trace. A worker's death re-runs its
batches elsewhere, and each (task, repetition) is still recorded once: the caller records only
what a completed batch returned.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from distributed import Client
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker

from .. import events
from ..engine.report import build_report, error_entry
from ..engine.status import TaskExecutionStatus
from ..errors import BackendLost
from ..funnel import UsageCounter
from ..telemetry import carrier
from ._worker import cancel_batches, run_batch

if TYPE_CHECKING:
    from ..engine.repetition import Unit

LINGER_S = 0.002
"""How long a repetition waits for others to share its batch (once per batch, not per unit)."""

_Waiting = tuple["Unit", float, "asyncio.Future[dict[str, Any]]"]
_UNREAD: Any = object()


class Batcher:
    """Collects repetitions into batches, submits them, and hands each report to its caller."""

    def __init__(self, client: Client, run_id: str, size: int, address: Callable[[], str]) -> None:
        self.client = client
        self.run_id = run_id
        self.size = max(1, size)
        self._address = address
        self._pending: list[_Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._collecting: set[asyncio.Task[None]] = set()
        self._submitted: set[Any] = set()  # Dask futures not yet done
        self._trace_parent: Any = _UNREAD

    async def run(self, unit: Unit, waited: float) -> dict[str, Any]:
        if self._trace_parent is _UNREAD:  # the run's span (OpenTelemetry), read once
            self._trace_parent = carrier()
        if self._trace_parent is not None:  # the worker's repetition span joins its trace
            unit.trace_parent = self._trace_parent
        loop = asyncio.get_running_loop()
        report: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending.append((unit, waited, report))
        if len(self._pending) >= self.size:
            self._send()
        elif self._timer is None:
            self._timer = loop.call_later(LINGER_S, self._send)
        return await report

    def _send(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        batch = [item for item in batch if not item[2].done()]  # a cancelled run's leftovers
        if not batch:
            return
        first = batch[0][0]
        try:
            future = self.client.submit(
                run_batch,
                self.run_id,
                [(unit, waited) for unit, waited, _ in batch],
                key=f"{self.run_id}-{first.task.id}-{first.repeat_idx}-{uuid.uuid4().hex[:8]}",
                pure=False,
            )
        except Exception as exc:  # e.g. a task or its agent_data that cannot be pickled
            _fail(batch, _cannot_run(exc, self._address()))
            return
        self._submitted.add(future)
        task = asyncio.get_running_loop().create_task(self._collect(future, batch))
        self._collecting.add(task)
        task.add_done_callback(self._collecting.discard)

    async def _collect(self, future: Any, batch: list[_Waiting]) -> None:
        try:
            reports: list[dict[str, Any]] = await future
        except KilledWorker as exc:  # it took down every worker it ran on: a report each
            reports = [_killed_report(unit, exc, waited) for unit, waited, _ in batch]
        except FutureCancelledError as exc:  # cancelled by the cluster, not by this run
            lost = BackendLost(
                f"the Dask scheduler at {self._address()} went away ({exc.reason}); the run stopped"
            )
            _fail(batch, lost)
            return
        except (OSError, CommClosedError) as exc:
            lost = BackendLost(
                f"lost the Dask scheduler at {self._address()}: {type(exc).__name__}: {exc}"
            )
            _fail(batch, lost)
            return
        except asyncio.CancelledError:
            for _, _, waiting in batch:
                waiting.cancel()
            raise
        except Exception as exc:  # anything else the cluster raised: the run's one error
            _fail(batch, _cannot_run(exc, self._address()))
            return
        finally:
            self._submitted.discard(future)
        for (_, _, waiting), report in zip(batch, reports, strict=True):
            if not waiting.done():
                waiting.set_result(report)

    async def aclose(self) -> None:
        """Stop what is still out (a cancelled or failed run): the batches on the cluster too."""
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._collecting):
            task.cancel()
        if self._submitted:  # Dask does not stop a batch that runs: the workers stop them
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.client.cancel(list(self._submitted))
                await self.client.run(cancel_batches, self.run_id, on_error="ignore")


def _cannot_run(error: Exception, address: str) -> BackendLost:
    return BackendLost(
        f"the Dask cluster at {address} could not run repetitions: {type(error).__name__}: {error}"
    )


def _fail(batch: list[_Waiting], error: BaseException) -> None:
    for _, _, waiting in batch:
        if not waiting.done():
            waiting.set_exception(error)


def _killed_report(unit: Unit, error: KilledWorker, waited: float) -> dict[str, Any]:
    """The report of a repetition whose worker died each time it ran (Dask gave up on it)."""
    return build_report(
        run_id=events.context_value("run_id"),
        task_id=unit.task.id,
        repeat_idx=unit.repeat_idx,
        status=TaskExecutionStatus.UNKNOWN_EXECUTION_ERROR,
        termination_reason=None,
        eval_results=None,
        error=error_entry(error),
        traces={},
        config={},
        usage=UsageCounter().as_dict(),
        queued_s=waited,
        duration_s=0.0,
        attempts=1,
    )
