"""Batcher: the batch lane's calls to one batch endpoint, gathered into provider batches.

One batcher serves one event loop's calls of a runtime to one provider batch API (a
`BatchWire`: OpenAI's or Anthropic's, at one API base), under one set of credentials and one
run's batch journal. A call queues its line (`request`) and waits; the batcher's own task
(started with the first line, ended when nothing is queued or open) sends the queued lines as
one batch when:

- it holds LLM_BATCH_SIZE lines, or the provider's byte cap (never more than its caps: OpenAI
  50,000 lines / 200 MB, Anthropic 100,000 requests / 256 MB): a batch at once, the rest wait;
- its oldest line has waited LLM_BATCH_LINGER;
- or nothing else can make progress: no line joined for a quiet period (`QUIET_S`, at most half
  the linger) and no other call of the runtime is in flight or waiting for a slot (the runtime's
  controller counts those; the batch lane's own submissions are told apart). Every call that
  could add a line is then waiting on a batch (this one's, or one at the provider), or doing
  work of its own (a tool, an evaluator) longer than the quiet period: a line that comes later
  goes into a later batch. So an agent's turn waits the quiet period, not the linger, once all
  the agents are waiting, and a lone call is sent after the quiet period.

Under a budget each line reserves its worst case before it is queued (a line waiting for budget
room is not queued, so it never holds a batch back nor hurries one) and holds it until its batch
is collected: a batch holds at most what is left of the budget over a line's worst case, which
the request's max_tokens (or the model's max_output_tokens in its price file) bounds. Lines do
not wait for their model's first answer as live requests do (`asynceval.funnel._costing`): that
would be a batch round trip of one line.

Creating a batch is one call of the route's gateway: it holds ONE slot of
MAX_CONCURRENT_LLM_CALLS (and a turn in the rate windows) while its requests go (OpenAI: the
file upload, then the batch), retried as any call; the batch then waits at the provider
holding none. Looks at it (from LLM_BATCH_POLL, doubling to 60 s) and the download of its
answers take no slot, and are retried by the same policy. Each line's answer goes back to its
call by custom_id; a line that errored retryably or expired goes into a later batch if its call
has attempts left (`asynceval.funnel._batch_call`).

A call that stops waiting leaves: a line not sent yet is dropped, a sent one's answer is
discarded; a batch none of whose calls still waits is cancelled at the provider (Ctrl-C ends a
run's calls, so its open batches are cancelled), unless the lane keeps batches
(`BatchLane.keep_batches`: a resumed run collects them). Each batch is told to the run's
`BatchJournal` before it is created, as soon as it has an id, and when it is done with.
Events: `batch_submitted`, `batch_progress` (each look that shows a change), `batch_completed`
(with the cost of its succeeded lines at the lane's price).

Resume (`asynceval.funnel._batch_resume`): lines are journaled with their call-journal keys, a
batch's answers go into the call journal before it is `ended`, and the batcher takes over the
batches earlier segments left open: a call whose key is in one waits for its answer.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from decimal import Decimal
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from .. import events
from ..errors import LLMCallFailed, ProviderError
from ._batch_http import BatchHttp, batcher_context
from ._batch_line import Batch, BatchLine, State
from ._batch_resume import BatchResume, batch_keys, journaled, keep_answers
from ._batch_wire import BatchWire, Kind, LineResult
from ._journal import current_journal

if TYPE_CHECKING:
    from ._batch_journal import BatchJournal
    from ._batch_lane import BatchLane
    from ._route import Route

QUIET_S = 1.0
"""The longest quiet period (see the module); never more than half of LLM_BATCH_LINGER."""
MAX_POLL_S = 60.0
"""The longest wait between two looks at a batch."""
CANCEL_TIMEOUT_S = 10.0
"""How long the cancel of an open batch may take when its calls have gone."""


class Batcher:
    """The batch lane's calls to one batch endpoint (see the module)."""

    def __init__(
        self,
        lane: BatchLane,
        wire: BatchWire,
        route: Route,
        headers: dict[str, str],
        journal: BatchJournal,
    ) -> None:
        settings = lane.settings
        self.lane = lane
        self.wire = wire
        self.route = route  # its pool, gateway (slot, retries) and simulator: the first caller's
        self.headers = headers  # who asks (credentials, API version): every request of a batch
        self.journal = journal
        self.calls = current_journal()  # the run's call journal: collected answers go there
        self.http = BatchHttp(route, wire, headers)
        self.size = max(1, min(settings.llm_batch_size, wire.max_requests))
        self.linger = settings.llm_batch_linger
        self.quiet = min(QUIET_S, self.linger / 2)
        self.poll = settings.llm_batch_poll
        self.max_attempts = route.gateway.retry_policy.max_attempts
        self._pending: dict[str, BatchLine] = {}  # in the order they came
        self._pending_bytes = 0
        self._last_join = 0.0
        self._sent: dict[str, Batch] = {}  # custom_id -> the batch its line is in
        self._open: set[Batch] = set()
        self._changed = anyio.Event()
        self._driver: asyncio.Task[None] | None = None
        self._stopped = anyio.Event()
        self._stopped.set()
        self.batches = 0  # created so far
        self.lines = 0  # lines sent so far
        self.resume = BatchResume(self, journal.claim(wire.provider, wire.base))

    @property
    def running(self) -> bool:
        return self._driver is not None

    async def request(self, line: BatchLine) -> LineResult:
        """Queue `line` (unless a batch taken over holds it) and wait for its answer; a
        cancelled caller leaves (see the module)."""
        if not self.resume.attach(line):
            self.enqueue(line)
        self._start()
        self._changed.set()
        try:
            await line.done.wait()
        except BaseException:
            self.withdraw(line)
            raise
        assert line.result is not None
        return line.result

    def enqueue(self, line: BatchLine) -> None:
        """Put `line` in the queue for the next batch."""
        line.state = State.PENDING
        line.queued_at = self._last_join = time.monotonic()
        self._pending[line.custom_id] = line
        self._pending_bytes += len(line.data) + 1
        self._changed.set()

    def wake(self) -> None:
        self._changed.set()

    def withdraw(self, line: BatchLine) -> None:
        """`line`'s call stopped waiting."""
        was = line.state
        if line.abandon():
            if self._pending.pop(line.custom_id, None) is not None:
                self._pending_bytes -= len(line.data) + 1
            self._changed.set()
        elif was is State.SUBMITTED:
            batch = self._sent.get(line.custom_id)
            if batch is not None:
                batch.live -= 1
                if batch.live <= 0:
                    batch.orphaned.set()

    async def wait_stopped(self) -> None:
        """Wait until nothing is queued or open (its task has ended)."""
        await self._stopped.wait()

    def _start(self) -> None:
        if self._driver is not None:
            return
        context = batcher_context()
        self._stopped = anyio.Event()
        self._driver = asyncio.get_running_loop().create_task(self._drive(), context=context)

    async def _drive(self) -> None:
        why = "the batch lane stopped (its event loop is ending)"
        try:  # a line queued while the task group ends starts it again (no await between)
            while self._pending or self._open or self.resume.active:
                async with anyio.create_task_group() as tg:
                    if self.resume.active and not self.resume.started:
                        self.resume.started = True
                        tg.start_soon(self.resume.run)
                    while self._pending or self._open or self.resume.active:
                        wait = self._due() if self._pending else math.inf
                        if wait <= 0:
                            tg.start_soon(self._run, self._take())
                            continue
                        self._changed = anyio.Event()
                        with anyio.move_on_after(wait):
                            await self._changed.wait()
        except Exception as exc:  # a bug of ours: no call may wait for ever, each is told
            why = f"the batch lane failed: {exc!r}"
        finally:
            self._driver = None
            self.resume.lost(why)
            for line in self._pending.values():
                line.lost(why)
            self._pending.clear()
            self._pending_bytes = 0
            for batch in self._open:
                for line in self._unanswered(batch):
                    line.lost(why)
            self._stopped.set()

    def _due(self) -> float:
        """Seconds until the queued lines go (0: now), by the rules of the module."""
        if len(self._pending) >= self.size or self._pending_bytes >= self.wire.max_bytes:
            return 0.0
        now = time.monotonic()
        oldest = next(iter(self._pending.values()))
        linger = oldest.queued_at + self.linger - now
        if linger <= 0:
            return 0.0
        quiet = self._last_join + self.quiet - now
        if quiet <= 0:
            if self.lane.idle(self.route.gateway.controller):
                return 0.0
            quiet = self.quiet  # others are at work: look again then
        return min(linger, quiet)

    def _take(self) -> Batch:
        """The next batch: queued lines in order, within the size and the byte cap."""
        lines: list[BatchLine] = []
        size = 0
        for line in itertools.islice(self._pending.values(), self.size):
            more = len(line.data) + 1
            if lines and size + more > self.wire.max_bytes:
                break
            lines.append(line)
            size += more
        batch = Batch(lines)
        for line in lines:
            del self._pending[line.custom_id]
            line.state = State.SUBMITTED
            self._sent[line.custom_id] = batch
        self._pending_bytes -= size
        self._open.add(batch)
        return batch

    async def _run(self, batch: Batch) -> None:
        try:
            if await self._submit(batch):
                await self._follow(batch)
        except ProviderError as exc:  # a look or a download the provider refused for good
            self._fail(batch, exc.status_code, exc.body, str(exc))
        finally:
            with anyio.CancelScope(shield=True):
                await self._close(batch)

    async def _submit(self, batch: Batch) -> bool:
        """Create the batch (journaled first); False when it could not be (its lines told)."""
        lines = batch.lines
        if batch.live <= 0:  # every call left before it went: nothing sent, nothing owed
            for line in lines:
                line.settle(Decimal(0))
            return False
        ids = [line.custom_id for line in lines]
        wire = self.wire
        try:
            await anyio.to_thread.run_sync(
                self.journal.intent, batch.key, wire.provider, wire.base, ids, batch_keys(batch)
            )
        except OSError as exc:  # not journaled, not sent: a kill could lose what it bills
            self._fail(batch, None, None, f"the batch journal could not be written: {exc}")
            return False
        self.lane.submitting += 1
        try:
            created = await self.http.create([line.data for line in lines], batch.key)
        except LLMCallFailed as exc:
            cause = exc.__cause__
            body = cause.body if isinstance(cause, ProviderError) else None
            self._fail(batch, exc.status_code, body, exc.message)
            return False
        finally:
            self.lane.submitting -= 1
        batch.id = str(created["id"])
        batch.last = created
        batch.started = time.monotonic()
        self.batches += 1
        self.lines += len(lines)
        await journaled(self.journal.created, batch.key, batch.id)
        events.batch_submitted(
            provider=wire.provider,
            endpoint=wire.base,
            batch_id=batch.id,
            requests=len(lines),
            call_ids=ids,
        )
        return True

    async def _follow(self, batch: Batch) -> None:
        """Look at the batch until it ends (LLM_BATCH_POLL doubling to 60 s), then hand its
        answers to its lines; return early when no call waits for it any more."""
        assert batch.id is not None
        wire = self.wire
        seen = wire.state(batch.last)
        delay = self.poll
        while True:
            if not seen.ended:
                with anyio.move_on_after(delay):
                    await batch.orphaned.wait()
                delay = min(delay * 2, MAX_POLL_S)
            if batch.orphaned.is_set():
                return
            try:
                if not seen.ended:
                    batch.last = await self.http.look(batch.id)
                    state = wire.state(batch.last)
                    if state != seen:
                        events.batch_progress(
                            batch_id=batch.id,
                            status=state.status,
                            completed=state.completed,
                            failed=state.failed,
                            total=state.total,
                            elapsed_s=time.monotonic() - batch.started,
                        )
                    seen = state
                    if not state.ended:
                        continue
                ids = [line.custom_id for line in batch.lines]
                found = await self.http.collect(batch.last, ids)
            except ProviderError as exc:
                if not exc.retryable:
                    raise
                seen = seen._replace(ended=False)  # look (and collect) again later
                continue
            self._answer(batch, seen.status, found)
            return

    def _answer(self, batch: Batch, status: str, found: dict[str, LineResult]) -> None:
        """Each line's answer to its call (a line the answers leave out: not done)."""
        assert batch.id is not None
        counts = {"succeeded": 0, "errored": 0, "expired": 0, "cancelled": 0}
        for line in self._unanswered(batch):
            result = found.get(line.custom_id)
            if result is None:
                result = LineResult(line.custom_id, "expired", None, b"")
            cancelled = result.kind == "expired" and status in ("cancelled", "canceled")
            counts["cancelled" if cancelled else result.kind] += 1
            cost = line.answer(result)
            if cost is not None:
                batch.cost = cost if batch.cost is None else batch.cost + cost
        batch.done = True
        batch.found = found
        self._completed(batch, status, **counts)

    def _completed(
        self,
        batch: Batch,
        status: str,
        succeeded: int = 0,
        errored: int = 0,
        expired: int = 0,
        cancelled: int = 0,
    ) -> None:
        """`batch_completed`, once a batch: collected, or failed or cancelled (its lines then
        counted as errored or not done)."""
        if batch.id is None or batch.reported:
            return
        batch.reported = True
        events.batch_completed(
            batch_id=batch.id,
            status=status,
            succeeded=succeeded,
            errored=errored,
            expired=expired,
            cancelled=cancelled,
            elapsed_s=time.monotonic() - batch.started,
            cost_usd=None if batch.cost is None else float(batch.cost),
        )

    def _fail(self, batch: Batch, status: int | None, body: str | None, message: str) -> None:
        """The batch could not be made or followed: its lines fail (not to be sent again)."""
        import json

        content = (body or json.dumps({"error": {"message": message}})).encode()
        kind: Kind = "expired" if status is None else "errored"
        for line in self._unanswered(batch):
            line.answer(LineResult(line.custom_id, kind, status, content, final=True))
        batch.done = batch.id is None  # a batch that exists is still the provider's
        self._completed(batch, "failed", errored=len(batch.lines))

    async def _close(self, batch: Batch) -> None:
        """The batch's end here: cancelled at the provider if it is still open (no call waits
        for it, or the batcher is stopping) unless the lane keeps batches; then its lines that
        were not answered are told, and the journal that it is done with."""
        self._open.discard(batch)
        try:
            if batch.id is not None and not batch.done and not self.lane.keep_batches:
                with anyio.move_on_after(CANCEL_TIMEOUT_S):
                    try:
                        await self.http.fetch(self.wire.cancel(batch.id, self.headers))
                        batch.done = True
                        self._completed(batch, "cancelled", cancelled=len(batch.lines))
                    except ProviderError:
                        pass  # it ended meanwhile, or the provider is gone: it stays journaled
            if batch.id is not None and batch.done:
                await keep_answers(self.calls, batch_keys(batch), batch.found)
                await journaled(self.journal.ended, batch.id)
        finally:
            for line in self._unanswered(batch):
                line.lost()
            self._changed.set()

    def _unanswered(self, batch: Batch) -> list[BatchLine]:
        """The lines of `batch` it has not answered (each taken out of it): a line it answered
        may be in a later batch already."""
        lines = [line for line in batch.lines if self._sent.get(line.custom_id) is batch]
        for line in lines:
            del self._sent[line.custom_id]
        return lines
