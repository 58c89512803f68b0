"""The batch lane on Dask: workers' calls join the caller's batches (DESIGN sections 10 and 16).

A worker's runtime relays each batch-lane line (`asynceval.funnel.BatchRelay`) to the caller
instead of making batches of its own: `WorkerRelay` sends its lines on the run's relay topic
(through the scheduler, a message per loop turn however many lines went out in it) and waits
for their answers; the caller's `CallerRelay` puts each line into the caller's batcher for its
batch API (`asynceval.funnel.relayed_line`), so one run makes one set of batches, as in one
process, each submitted, followed, journaled and cancelled by the caller. The answers go back
to the worker that sent the lines (`client.run` of `deliver_answers` on it, the answers of one
loop turn together).

The caller's batches are created through a runtime of the caller's own whose slots are leases
of the run's semaphore and whose rate turns are the run's windows on the scheduler, so a
batch's creation counts against the cluster-wide MAX_CONCURRENT_LLM_CALLS like any call.

A call cancelled on a worker withdraws its line (the caller drops it, or discards its answer
and cancels a batch none of whose calls still waits, unless batches are kept). A worker that
dies takes its calls with it: its lines' answers, when they come, have nowhere to go and are
dropped (their repetitions run again elsewhere, with new lines). The run's end cancels what
is still relayed. The caller keeps no call journal on Dask, so its batches are not journaled
for `--resume`: a caller killed with batches open leaves them at the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from typing import TYPE_CHECKING, Any

import anyio

from ..funnel import BatchLane, LineResult, RelayedLine, relayed_line
from ..runtime import Runtime
from ._controller import ClusterController
from ._rate import ClusterRate
from ._slots import ClusterSlots

if TYPE_CHECKING:
    from distributed import Client, Semaphore, Worker

    from ..config import Settings

LINE, WITHDRAW = "line", "withdraw"
CLOSE_WAIT_S = 10.0
"""How long the run's end waits for the caller's batchers to cancel what is still open."""


def relay_topic(run_id: str) -> str:
    """The topic a run's workers send their lines on."""
    return f"asynceval-{run_id}-batch-lines"


class WorkerRelay:
    """A worker's side (see the module): one per run on each worker, on the worker's loop."""

    def __init__(self, worker: Worker, run_id: str) -> None:
        self._worker = worker
        self._topic = relay_topic(run_id)
        self._waiting: dict[str, asyncio.Future[LineResult]] = {}
        self._outbox: list[dict[str, Any]] = []
        self._closed = False

    async def request(self, line: RelayedLine) -> LineResult:
        if self._closed:
            raise anyio.ClosedResourceError("the run has ended on this worker")
        future: asyncio.Future[LineResult] = asyncio.get_running_loop().create_future()
        self._waiting[line["id"]] = future
        self._send({"op": LINE, "worker": self._worker.address, **line})
        try:
            return await future
        except BaseException:
            if self._waiting.pop(line["id"], None) is not None and not self._closed:
                self._send({"op": WITHDRAW, "worker": self._worker.address, "id": line["id"]})
            raise

    def deliver(self, answers: list[tuple[Any, ...]]) -> None:
        """Answers from the caller, each a `LineResult` as a tuple."""
        for answer in answers:
            result = LineResult(*answer)
            future = self._waiting.pop(result.custom_id, None)
            if future is not None and not future.done():
                future.set_result(result)

    def close(self) -> None:
        """The run ended here: calls still waiting are told (their lines are the caller's to
        cancel)."""
        self._closed = True
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(anyio.ClosedResourceError("the run has ended on this worker"))

    def _send(self, message: dict[str, Any]) -> None:
        if not self._outbox:  # the lines of this loop turn go together
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(message)

    def _flush(self) -> None:
        messages, self._outbox = self._outbox, []
        if messages:
            self._worker.log_event(self._topic, messages)


class CallerRelay:
    """The caller's side (see the module): open with the run, closed at its end."""

    def __init__(
        self, client: Client, run_id: str, settings: Settings, semaphore: Semaphore
    ) -> None:
        self._client = client
        self._run = run_id
        self._settings = settings
        self._semaphore = semaphore
        self._runtime: Runtime | None = None
        self._slots: ClusterSlots | None = None
        self._context: contextvars.Context | None = None
        self._lines: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._outbox: dict[str, list[tuple[Any, ...]]] = {}
        self._sending: set[asyncio.Task[None]] = set()
        self.lines = 0  # relayed so far

    @classmethod
    def opened(
        cls, client: Client, run_id: str, settings: Settings, semaphore: Semaphore
    ) -> CallerRelay:
        """A relay taking the run's lines already (open it before the workers can send one)."""
        relay = cls(client, run_id, settings, semaphore)
        relay.open()
        return relay

    def open(self) -> None:
        """Start taking the workers' lines (in the run's context: its bound event fields)."""
        settings = self._settings
        loop = asyncio.get_running_loop()
        controller = ClusterController.from_settings(settings)
        requests, tokens = settings.llm_requests_per_minute, settings.llm_tokens_per_minute
        rate = None
        if requests is not None or tokens is not None:
            rate = ClusterRate(self._run, self._client.scheduler, loop, requests, tokens)
        runtime = Runtime(settings, limiter=controller, rate=rate)

        def pause_here(endpoint: str, seconds: float) -> None:
            controller.pause(endpoint, seconds, share=False)

        self._slots = ClusterSlots(self._semaphore, loop, self._run, pause_here)
        controller.shared = self._slots
        # The caller's choice (--keep-batches) holds for the batches it makes for the workers.
        BatchLane.of(runtime).keep_batches = BatchLane.of(Runtime.current()).keep_batches
        self._runtime = runtime
        self._context = contextvars.copy_context()
        self._client.subscribe_topic(relay_topic(self._run), self.on_message)

    def on_message(self, event: tuple[float, Any]) -> None:
        """A worker's lines and withdrawals (the topic's handler, on the caller's loop)."""
        _, messages = event
        for message in messages if isinstance(messages, list | tuple) else [messages]:
            if not isinstance(message, dict):
                continue
            key = (str(message.get("worker")), str(message.get("id")))
            if message.get("op") == WITHDRAW:
                task = self._lines.pop(key, None)
                if task is not None:
                    task.cancel()
            elif message.get("op") == LINE and self._context is not None:
                line = RelayedLine(
                    id=key[1],
                    base=str(message["base"]),
                    suffix=str(message["suffix"]),
                    headers=dict(message["headers"]),
                    data=str(message["data"]),
                )
                loop = asyncio.get_running_loop()
                task = loop.create_task(self._answer(key, line), context=self._context.copy())
                self._lines[key] = task
                self.lines += 1

    async def _answer(self, key: tuple[str, str], line: RelayedLine) -> None:
        assert self._runtime is not None
        try:
            result = await relayed_line(self._runtime, line)
        except Exception as exc:  # a bug of ours or a setting the line cannot go with
            body = json.dumps({"error": {"message": f"{type(exc).__name__}: {exc}"}}).encode()
            result = LineResult(line["id"], "errored", 500, body, final=True)
        finally:
            if self._lines.get(key) is asyncio.current_task():
                del self._lines[key]
        worker = key[0]
        outbox = self._outbox.get(worker)
        if outbox is None:
            outbox = self._outbox[worker] = []
            asyncio.get_running_loop().call_soon(self._flush, worker)
        outbox.append(tuple(result))

    def _flush(self, worker: str) -> None:
        answers = self._outbox.pop(worker, [])
        if answers:
            task = asyncio.get_running_loop().create_task(self._deliver(worker, answers))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _deliver(self, worker: str, answers: list[tuple[Any, ...]]) -> None:
        # A worker gone: its calls are gone too (their repetitions run again elsewhere).
        with contextlib.suppress(Exception):
            await self._client.run(
                deliver_answers, self._run, answers, workers=[worker], on_error="ignore"
            )

    async def aclose(self) -> None:
        """The run's end: what is still relayed is withdrawn, the batches made for it cancelled
        (unless kept), the relay's runtime closed."""
        with contextlib.suppress(Exception):
            self._client.unsubscribe_topic(relay_topic(self._run))
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_WAIT_S):
            tasks = list(self._lines.values())
            for task in tasks:
                task.cancel()
            for task in [*tasks, *self._sending]:
                with contextlib.suppress(BaseException):
                    await task
            if self._runtime is not None:
                await BatchLane.of(self._runtime).aclose()
        if self._slots is not None:
            with contextlib.suppress(Exception):
                await self._slots.aclose()
        if self._runtime is not None:
            with contextlib.suppress(Exception):
                await self._runtime.aclose()


async def deliver_answers(run_id: str, answers: list[tuple[Any, ...]], dask_worker: Worker) -> None:
    """On a worker's loop: hand `answers` to the run's calls that wait for them (`client.run`)."""
    from ._worker import plugin_name

    plugin = dask_worker.plugins.get(plugin_name(run_id))
    running = getattr(plugin, "running", None)
    relay = getattr(running, "relay", None)
    if isinstance(relay, WorkerRelay):
        relay.deliver(answers)
