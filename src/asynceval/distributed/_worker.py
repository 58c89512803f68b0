"""What a Dask worker runs for one asynceval run: a plugin holding the run's state, and the
function each repetition is submitted as.

The plugin (one per run, registered by the caller, also installed on workers that join later)
unpickles the Benchmark once, builds the worker's `Runtime` (its own FIFO slots in front of the
run's cluster-wide semaphore) and, for a run with a cost budget, its `ClusterBudget` (bound
around each repetition: every call reserves from the run's ledger on the scheduler), and
forwards the worker's events to the caller under the run's topic, each tagged with the
worker's address. Its batch-lane calls join the caller's batches (`_relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import threading
import time
from contextvars import ContextVar
from typing import Any, TextIO, cast

import anyio
import anyio.to_thread
import cloudpickle
import dask.config
from anyio.from_thread import BlockingPortal
from distributed import Semaphore, Worker, get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from .. import events
from ..config import Settings
from ..engine.repetition import Repetitions, Unit
from ..engine.threads import ThreadRunner, executors_carry_context, threads_scope
from ..errors import RunFinished
from ..funnel import BatchLane
from ..limits import budget_scope
from ..runtime import Runtime
from ..telemetry import flush_if_set_up
from ._budget import ClusterBudget
from ._controller import ClusterController
from ._grants import PAUSE_HERE
from ._rate import ClusterRate
from ._relay import WorkerRelay
from ._slots import ClusterSlots

_run_id: ContextVar[str | None] = ContextVar("asynceval_dask_run", default=None)

END_OF_EVENTS = "asynceval-end-of-events"
"""The last message a worker sends on a run's topic when asked to flush (`flush_events`)."""
STOP_WAIT_S = 10.0
FLUSH_SPANS_S = 4.0
"""How long a worker's spans may take to go at a run's end (within the caller's wait for its
workers' last events)."""
"""How long a stopped run's LLM calls out at the provider get to finish before they are cut."""


def quiet_dask_logs() -> dict[str, int]:
    """Dask's loggers in this process at CRITICAL: run on a local cluster's workers (and in the
    caller) as the cluster the run started closes, when its scheduler and workers lose each other
    and log it, tracebacks included. Returns the levels they had (`restore_levels`)."""
    import logging

    names = [
        "distributed",
        *(n for n in logging.root.manager.loggerDict if n.startswith("distributed.")),
    ]
    levels = {}
    for name in names:
        logger = logging.getLogger(name)
        levels[name] = logger.level
        logger.setLevel(logging.CRITICAL)
    return levels


def restore_levels(levels: dict[str, int]) -> None:
    """Put back the levels `quiet_dask_logs` changed."""
    import logging

    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def topic(run_id: str) -> str:
    return f"asynceval-{run_id}"


def plugin_name(run_id: str) -> str:
    return f"asynceval-run-{run_id}"


class _Forward(io.TextIOBase):
    """The worker's event stream: a line written while a run's repetition is running goes to
    that run's topic (so to the caller's events file); any other line to stderr. Lines go out
    in batches, one message every `FORWARD_S` per run (a message per line cost the scheduler
    and the caller more than the lines)."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._lock = threading.Lock()
        self._lines: dict[str, list[str]] = {}  # run -> lines not sent yet

    def write(self, line: str) -> int:
        run = _run_id.get()
        if run is None or not line.strip():
            return sys.stderr.write(line)
        with self._lock:
            lines = self._lines.get(run)
            first = lines is None
            if first:
                lines = self._lines[run] = []
            lines.append(line.rstrip("\n"))  # type: ignore[union-attr]
        if first:  # the loop sends this run's lines a moment from now, with those that follow
            self._worker.loop.add_callback(self._later, run)
        return len(line)

    def _later(self, run: str) -> None:
        asyncio.get_running_loop().call_later(FORWARD_S, self.send, run)

    def send(self, run: str) -> None:
        """Send `run`'s waiting lines now (on the worker's loop)."""
        with self._lock:
            lines = self._lines.pop(run, None)
        if lines:
            self._worker.log_event(topic(run), lines)

    def flush(self) -> None:
        pass


FORWARD_S = 0.02
_forwards: dict[Worker, _Forward] = {}


class RunPlugin(WorkerPlugin):
    """One run's state on one worker (see the module)."""

    def __init__(
        self,
        run_id: str,
        bench: bytes,
        settings: Settings,
        config: dict[str, Any],
        tasks: int,
        semaphore: str,
        budget: tuple[str, str] | None = None,
    ) -> None:
        self.caller_pid = os.getpid()
        # The caller's bound event fields (run_id, the application's own), bound on the workers
        # too: JSON scalars as they are, the rest as the repr a line would have shown.
        self.bound = {
            key: value if value is None or type(value) in (str, int, float, bool) else repr(value)
            for key, value in events.bound_fields().items()
        }
        self.run_id = run_id
        self.semaphore = semaphore
        self.bench = bench
        self.settings = settings
        self.config = config
        self.tasks = tasks
        self.budget = budget  # the run's ledger on the scheduler and its limit, if it has one
        self._state: asyncio.Future[_WorkerRun] | None = None

    def setup(self, worker: Worker) -> None:
        self.worker = worker

        # Another worker's 429 pause, sent by the scheduler (`_grants`); once per worker. A
        # function, not a partial: Dask logs each handler it calls by its __name__.
        def asynceval_pause_here(run: str, endpoint: str, seconds: float) -> None:
            _pause_here(worker, run, endpoint, seconds)

        worker.handlers.setdefault(PAUSE_HERE, asynceval_pause_here)
        # A worker in the caller's own process (a threaded cluster) writes to the caller's sink.
        if os.getpid() != self.caller_pid and worker not in _forwards:
            forward = _forwards[worker] = _Forward(worker)
            events.configure_logging(self.settings, stream=cast(TextIO, forward))

    async def state(self) -> _WorkerRun:
        """The run's state on this worker, built once however many repetitions ask at once
        (each building its own would give each its own limiter)."""
        if self._state is None:
            self._state = asyncio.ensure_future(_WorkerRun.start(self))
        return await asyncio.shield(self._state)

    @property
    def running(self) -> _WorkerRun | None:
        """The run's state here once built."""
        state = self._state
        if state is None or not state.done() or state.cancelled() or state.exception():
            return None
        return state.result()

    async def teardown(self, worker: Worker) -> None:
        if self._state is not None and self._state.done() and not self._state.exception():
            await self._state.result().close()


class _WorkerRun:
    """The worker's runtime, repetitions, threads and portal for one run."""

    def __init__(self, plugin: RunPlugin, semaphore: Semaphore) -> None:
        settings = plugin.settings
        self.run_id = plugin.run_id
        self.bound = plugin.bound
        self.worker = plugin.worker.address
        loop = asyncio.get_running_loop()
        requests, tokens = settings.llm_requests_per_minute, settings.llm_tokens_per_minute
        rate = None
        if requests is not None or tokens is not None:  # the run's windows, on the scheduler
            rate = ClusterRate(plugin.run_id, plugin.worker.scheduler, loop, requests, tokens)
        controller = ClusterController.from_settings(settings)
        self.runtime = Runtime(settings, limiter=controller, rate=rate)
        # Batch-lane calls join the caller's batches (`_relay`).
        self.relay = WorkerRelay(plugin.worker, plugin.run_id)
        BatchLane.of(self.runtime).relay = self.relay
        self.budget: ClusterBudget | None = None
        if plugin.budget is not None:  # the run's cost budget, kept on the scheduler
            ledger, limit = plugin.budget
            worker = plugin.worker
            self.budget = ClusterBudget(
                plugin.run_id, ledger, limit, worker.scheduler, loop, worker.address
            )

        def pause_here(endpoint: str, seconds: float) -> None:
            controller.pause(endpoint, seconds, share=False)  # one of theirs: not sent back

        self.slots = ClusterSlots(semaphore, loop, plugin.run_id, pause_here)
        controller.shared = self.slots
        self.semaphore = semaphore
        bench = cloudpickle.loads(plugin.bench)
        self.repetitions = Repetitions(bench, settings, self.runtime.retry_policy)
        self.threads = ThreadRunner(plugin.tasks)
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        self.batches: set[asyncio.Task[Any]] = set()  # the run's batches running here

    @classmethod
    async def start(cls, plugin: RunPlugin) -> _WorkerRun:
        # The run's lease timeout, for this semaphore only (its refresh interval and lease).
        with dask.config.set(plugin.config):
            semaphore = Semaphore(
                max_leases=plugin.settings.max_concurrent_llm_calls, name=plugin.semaphore
            )
            await semaphore
        self = cls(plugin, semaphore)
        ready = anyio.Event()
        asyncio.get_running_loop().create_task(self._hold_portal(ready))
        await ready.wait()
        return self

    async def _hold_portal(self, ready: anyio.Event) -> None:
        """The run's portal for sync code, entered and left in this one task; while it is open,
        a thread pool a repetition's code submits to carries its context (as on the caller)."""
        try:
            with executors_carry_context():
                async with BlockingPortal() as portal:
                    self.repetitions.portal = portal
                    ready.set()
                    await self._stop.wait()
                    self.repetitions.run_over.set()
                    await portal.stop(cancel_remaining=True)
        finally:
            ready.set()
            self._stopped.set()

    async def run(self, unit: Unit) -> dict[str, Any]:
        token = self.runtime.bind()
        run_token = _run_id.set(self.run_id)
        try:
            with (
                events.bind_context(**{**self.bound, "worker": self.worker}),
                threads_scope(self.threads),
                budget_scope(self.budget),
            ):
                return await self.repetitions.run(unit)
        finally:
            _run_id.reset(run_token)
            self.runtime.unbind(token)

    async def stop_batches(self) -> None:
        """Stop this run's batches here (Dask does not stop a task that is executing): no new
        LLM call starts, the calls out at the provider get `STOP_WAIT_S` to finish (so their
        slots count for as long as the provider serves them), then what is left is cancelled."""
        self.slots.refuse()
        batches = [task for task in self.batches if not task.done()]
        with anyio.move_on_after(STOP_WAIT_S):
            for task in batches:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(task)
        for task in batches:
            task.cancel()
        with anyio.move_on_after(5):
            for task in batches:
                with contextlib.suppress(BaseException):
                    await task

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    async def close(self) -> None:
        await self.stop_batches()
        self.relay.close()
        self._stop.set()
        with anyio.move_on_after(5):
            await self._stopped.wait()
        with contextlib.suppress(Exception):
            await self.runtime.aclose()
        if self.budget is not None:  # what its calls cost reaches the ledger before it goes
            await self.budget.flushed()
        await self.slots.aclose()
        # Only this worker's lease refreshes stop (the semaphore is the run's, closed by the
        # caller), and only once no lease is left here: a held lease must not expire while used.
        refresh = getattr(self.semaphore, "refresh_callback", None)
        if refresh is not None and not self.slots.holding:
            refresh.stop()


async def run_batch(run_id: str, items: list[tuple[Unit, float]]) -> list[dict[str, Any]]:
    """A batch of repetitions, run at once on a worker's event loop: their reports, in order.
    Each item's float is how long it waited at the caller before it was sent (its report's
    queued_s counts it, in this worker's clock)."""
    worker = get_worker()
    plugin = worker.plugins[plugin_name(run_id)]
    assert isinstance(plugin, RunPlugin)
    state = await plugin.state()
    if state.closed:
        raise RunFinished(f"run {run_id} has ended on this worker")
    reports: list[dict[str, Any]] = [{} for _ in items]
    batch = asyncio.current_task()
    assert batch is not None
    state.batches.add(batch)

    async def one(index: int, unit: Unit, waited_s: float) -> None:
        unit.selected_at = time.monotonic() - waited_s
        reports[index] = await state.run(unit)

    try:
        async with anyio.create_task_group() as tg:
            for index, (unit, waited_s) in enumerate(items):
                tg.start_soon(one, index, unit, waited_s)
    finally:
        state.batches.discard(batch)
    return reports


async def cancel_batches(run_id: str, dask_worker: Worker) -> None:
    """The caller stopped (Ctrl-C, an error): stop the run's batches still running here."""
    plugin = dask_worker.plugins.get(plugin_name(run_id))
    if isinstance(plugin, RunPlugin) and plugin.running is not None:
        await plugin.running.stop_batches()


def _pause_here(worker: Worker, run: str, endpoint: str, seconds: float) -> None:
    """Another worker's 429 paused `endpoint` for `seconds` from now (the scheduler's handler
    `PAUSE_HERE`): pause it here too. A run whose state is not built here yet has no call to
    hold; its first lease brings the pauses in force."""
    plugin = worker.plugins.get(plugin_name(run))
    if isinstance(plugin, RunPlugin) and plugin.running is not None:
        plugin.running.slots.learned(endpoint, seconds)


async def flush_budget(run_id: str, dask_worker: Worker) -> bool:
    """Wait (briefly) until the ledger has what the run's calls here cost; whether it has."""
    plugin = dask_worker.plugins.get(plugin_name(run_id))
    if isinstance(plugin, RunPlugin) and plugin.running is not None:
        budget = plugin.running.budget
        if budget is not None:
            return await budget.flushed()
    return True


async def flush_events(run_id: str, dask_worker: Worker) -> str:
    """Send the run's waiting event lines, then the end-of-events marker on its topic; first,
    the spans and metrics the OpenTelemetry providers asynceval set up here still hold (sent on
    the batch processor's schedule otherwise: a cluster closed right after the run lost them)."""
    with anyio.move_on_after(FLUSH_SPANS_S):
        await anyio.to_thread.run_sync(flush_if_set_up, FLUSH_SPANS_S, abandon_on_cancel=True)
    forward = _forwards.get(dask_worker)
    if forward is not None:
        forward.send(run_id)
    dask_worker.log_event(topic(run_id), [END_OF_EVENTS, str(dask_worker.address)])
    return str(dask_worker.address)
