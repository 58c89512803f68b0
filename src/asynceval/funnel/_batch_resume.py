"""BatchResume: a resumed run takes over the batches an earlier segment left open (DESIGN
section 16, "Nothing billed is lost").

A run killed with batches at the provider (kill -9, a lost machine, or Ctrl-C with
`--keep-batches`) left them in its batch journal (`batches.jsonl`): an intent with an id and no
end, or an intent with no id (killed between the intent and the provider's answer). Each intent
names its lines' call-journal keys (`CacheUse.key`: the request, its repetition, and how many
identical requests that repetition made before it), which a resumed run's calls meet again:

- the batcher of the batches' endpoint (made by the resumed run's first call to it) claims them
  and follows each (LLM_BATCH_POLL doubling to 60 s; a `batch_reattached` event) until it ends,
  then collects its answers: each succeeded one is kept in the call journal under its key (so a
  later resume replays it), and each answer goes to the resumed call with the same key, which
  waited for it instead of sending a new line (a call that comes after the batch was collected
  gets its answer at once);
- an intent with no id is looked up at the provider (`asynceval.funnel._batch_find`): an
  OpenAI batch by the key in its metadata (`asynceval_batch_key`), an Anthropic batch by being
  the only one that could be its (its time and size; its answers checked); found, it is
  followed as above (and its id journaled); not found, its lines were never created, or cannot
  be told apart: the calls that wait for them are queued as new lines (`found: "not_found"`, a
  WARNING);
- an expired or errored line goes back to its call, which sends it again within
  RETRY_MAX_ATTEMPTS, as in the run that sent it.

A batch taken over is never cancelled by the resumed run: what it holds was paid for. It is
journaled `ended` once its answers are in the call journal; a run that ends (or is stopped)
before that leaves it open for the next resume.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from .. import events
from ..errors import ProviderError
from ..runtime import CachedAnswer
from ._batch_find import find_batch, owns
from ._batch_line import Batch, BatchLine, State
from ._batch_wire import LineResult

if TYPE_CHECKING:
    from ._batch_journal import OpenBatch
    from ._batcher import Batcher
    from ._journal import CallJournal

MAX_POLL_S = 60.0
"""The longest wait between two looks at a batch taken over."""


class BatchResume:
    """The batches one batcher took over from earlier segments (see the module)."""

    def __init__(self, batcher: Batcher, found: list[OpenBatch]) -> None:
        self.batcher = batcher
        self.batches = found
        self._by_key: dict[str, OpenBatch] = {}  # call key -> the open batch holding it
        for batch in found:
            for key, _url in batch.lines.values():
                self._by_key[key] = batch
        self._waiting: dict[str, BatchLine] = {}  # call key -> the resumed call's line
        self._answers: dict[str, LineResult] = {}  # collected, no call came for it yet
        self._matched: set[str] = set()  # ids found for intents that had none
        self.started = False
        self.active = bool(found)

    def attach(self, line: BatchLine) -> bool:
        """True when `line` is answered by a batch taken over (its answer is in, or it waits
        for it); False: it goes into a new batch."""
        key = line.key
        if key is None or not (self._by_key or self._answers):
            return False
        line.state = State.SUBMITTED
        answer = self._answers.pop(key, None)
        if answer is not None:
            line.answer(answer._replace(custom_id=line.custom_id))
            return True
        if key in self._by_key:
            self._waiting[key] = line
            return True
        line.state = State.PENDING
        return False

    async def run(self) -> None:
        """Follow every batch taken over until it is collected (or cannot be)."""
        try:
            async with anyio.create_task_group() as tg:
                for batch in self.batches:
                    tg.start_soon(self._take_over, batch)
        finally:
            self.active = False
            for key in list(self._by_key):
                self._release(key)
            self.batcher.wake()

    async def _take_over(self, batch: OpenBatch) -> None:
        batcher = self.batcher
        wire = batcher.wire
        how = "journal"
        if batch.batch_id is None:
            taken = self.batcher.journal.known_ids() | self._matched
            batch.batch_id, how = await find_batch(
                batcher.http, wire, batcher.headers, batch, taken
            )
            if batch.batch_id is not None:
                self._matched.add(batch.batch_id)
        events.batch_reattached(
            provider=wire.provider,
            endpoint=wire.base,
            batch_key=batch.batch_key,
            batch_id=batch.batch_id,
            requests=len(batch.lines),
            found=how,
        )
        if batch.batch_id is None:
            for key, _url in batch.lines.values():
                self._release(key)  # never created (or not to be found): sent again
            return
        if how != "journal":
            await journaled(batcher.journal.created, batch.batch_key, batch.batch_id)
        try:
            found = await self._follow(batch.batch_id, list(batch.lines))
        except ProviderError as exc:  # refused for good (the batch is gone): sent again
            for key, _url in batch.lines.values():
                self._release(key)
            events.batch_completed(
                batch_id=batch.batch_id,
                status=f"lost ({exc.status_code})",
                succeeded=0,
                errored=0,
                expired=len(batch.lines),
                elapsed_s=time.time() - batch.time,
            )
            return
        if how == "matched" and not owns(batch, found):  # another's batch: sent again
            events.batch_reattached(
                provider=wire.provider,
                endpoint=wire.base,
                batch_key=batch.batch_key,
                batch_id=batch.batch_id,
                requests=len(batch.lines),
                found="not_found",
            )
            for key, _url in batch.lines.values():
                self._release(key)
            return
        await keep_answers(batcher.calls, batch.lines, found)
        await journaled(batcher.journal.ended, batch.batch_id)
        self._hand_out(batch, found)

    async def _follow(self, batch_id: str, custom_ids: list[str]) -> dict[str, LineResult]:
        """Look at the batch until it ends, then its answers by custom_id."""
        http, wire = self.batcher.http, self.batcher.wire
        delay = self.batcher.poll
        seen = None
        while True:
            try:
                last = await http.look(batch_id)
                state = wire.state(last)
                if state != seen:
                    events.batch_progress(
                        batch_id=batch_id,
                        status=state.status,
                        completed=state.completed,
                        failed=state.failed,
                        total=state.total,
                        elapsed_s=0.0,
                    )
                seen = state
                if state.ended:
                    return await http.collect(last, custom_ids)
            except ProviderError as exc:
                if not exc.retryable:
                    raise
            await anyio.sleep(delay)
            delay = min(delay * 2, MAX_POLL_S)

    def _hand_out(self, batch: OpenBatch, found: dict[str, LineResult]) -> None:
        """Each line's answer to the resumed call with its key (or kept for one to come)."""
        counts = {"succeeded": 0, "errored": 0, "expired": 0}
        cost: Decimal | None = None
        for custom_id, (key, _url) in batch.lines.items():
            result = found.get(custom_id) or LineResult(custom_id, "expired", None, b"")
            counts[result.kind] += 1
            self._by_key.pop(key, None)
            line = self._waiting.pop(key, None)
            if line is None:
                self._answers[key] = result
                continue
            paid = line.answer(result._replace(custom_id=line.custom_id))
            if paid is not None:
                cost = paid if cost is None else cost + paid
        assert batch.batch_id is not None
        events.batch_completed(
            batch_id=batch.batch_id,
            status="completed",
            **counts,
            elapsed_s=time.time() - batch.time,
            cost_usd=None if cost is None else float(cost),
        )

    def _release(self, key: str) -> None:
        """The line with `key` is not in any batch taken over: its call's line is queued."""
        self._by_key.pop(key, None)
        line = self._waiting.pop(key, None)
        if line is not None and line.state is State.SUBMITTED:
            line.state = State.PENDING
            self.batcher.enqueue(line)

    def lost(self, why: str) -> None:
        """The batcher stopped: the calls still waiting are told."""
        for line in self._waiting.values():
            line.lost(why)
        self._waiting.clear()


async def keep_answers(
    calls: CallJournal | None,
    lines: dict[str, tuple[str, str]],
    found: dict[str, LineResult],
) -> None:
    """Each succeeded answer in `found` (by custom_id) into the call journal under its line's
    key (`lines`: custom_id -> (key, URL)), committed before this returns (a batch is journaled
    `ended` only then: nothing billed is lost to a kill in between)."""
    if calls is None:
        return
    waits = []
    for custom_id, (key, url) in lines.items():
        result = found.get(custom_id)
        if result is None or not result.succeeded:
            continue
        answer = CachedAnswer(result.status_code or 200, "application/json", result.body)
        with contextlib.suppress(RuntimeError, ValueError):
            kept = calls.keep(bytes.fromhex(key), url, answer, wait=True)
            if kept is not None:
                waits.append(kept)
    for kept in waits:
        with contextlib.suppress(OSError):
            await kept


def batch_keys(batch: Batch) -> dict[str, tuple[str, str]]:
    """A batch's lines that have call-journal keys: custom_id -> (key, URL)."""
    return {line.custom_id: (line.key, line.url) for line in batch.lines if line.key is not None}


async def journaled(record: Callable[..., None], *args: str) -> None:
    """A record of a batch that exists, written off the loop (a disk that refuses it must not
    stop the batch: its intent is on disk already)."""
    with contextlib.suppress(OSError):
        await anyio.to_thread.run_sync(record, *args)
