"""`Race`: one attempt's first request and, if it is still out past the delay, its hedge; the
first answer wins (the rules are `asynceval.funnel._hedge`'s)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from .. import events
from ._call import Call, hedge_id
from ._usage import Usage

if TYPE_CHECKING:
    from ._gateway import Attempt, Gateway
    from ._hedge import Hedger
    from ._lease import Lease

T = TypeVar("T")

RECHECK = 0.25
"""A request that found no room for its hedge (no free slot, no budget) is looked at again after
this share of the delay, as long as it is out."""


async def _discard(result: object) -> None:
    """Close a losing answer that also arrived, if it holds anything (a response stream keeps its
    slot until closed); its tokens were counted when its request released its slot."""
    close = getattr(result, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()


class Race(Generic[T]):
    """One attempt's first request, and its hedge if one goes (see the module).

    The first request runs in the caller's task inside `scope`, which the hedge cancels when it
    answers first; the hedge runs in a task of its own, started from a timer when the delay
    passes, inside `hedge_scope`, which the caller cancels when its request answers first (or
    the call is cancelled); then it waits for the hedge's task to end, shielded, so that no slot
    outlives the call. Both run on the caller's loop: `winner` needs no lock.
    """

    __slots__ = (
        "_attempt",
        "_call",
        "_estimated",
        "_gateway",
        "_hedger",
        "_usage_of",
        "delay",
        "due",
        "first_at",
        "hedge_at",
        "hedge_result",
        "hedge_scope",
        "loop",
        "over",
        "scope",
        "sent_at",
        "task",
        "timer",
        "winner",
    )

    def __init__(
        self,
        hedger: Hedger,
        gateway: Gateway,
        attempt: Attempt[T],
        call: Call,
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
    ) -> None:
        self._hedger = hedger
        self._gateway = gateway
        self._attempt = attempt
        self._call = call
        self._estimated = estimated_tokens
        self._usage_of = usage_of
        self.delay = hedger.delay()
        self.scope = anyio.CancelScope()
        self.sent_at = self.first_at = 0.0  # monotonic; 0: not sent / not answered
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None
        self.winner: str | None = None  # "first" or "hedge": whichever answered first
        self.over = False  # the race is decided or abandoned: a hedge not yet started stays home
        self.loop: asyncio.AbstractEventLoop | None = None  # the caller's, once it has sent
        self.due = False  # its delay passed and it waited for the budget
        self.hedge_scope: anyio.CancelScope | None = None
        self.hedge_result: T | None = None
        self.hedge_at = 0.0

    async def run(self, requeue: int) -> T:
        """The attempt's outcome: the first answer of the two, else the first request's error."""
        failure: Exception | None = None
        try:
            with self.scope:
                try:
                    result = await self._gateway._send(
                        self._first, self._call, self._estimated, self._usage_of, requeue
                    )
                except Exception as exc:  # a cancellation passes: the call's, or the hedge's win
                    failure = exc
                else:
                    self.first_at = time.monotonic()
                    if self.winner is None:
                        self.winner = "first"
                        self._learn(self.first_at - self.sent_at)
                        return result
                    self._learn(self.first_at - self.sent_at)
                    await _discard(result)  # the hedge won in the same turn of the loop
            if self.winner == "hedge":
                return self.hedge_result  # type: ignore[return-value]  # set with the winner
            self._stop_timer()  # the first failed before its delay: no hedge now
            if self.task is not None:
                await asyncio.wait((self.task,))  # the hedge is out: its answer may still win
                if self.winner == "hedge":
                    return self.hedge_result  # type: ignore[return-value]
            assert failure is not None  # only the hedge's win cancels `scope`
            raise failure
        finally:
            self._over()
            if self.task is not None:
                await self._end()

    async def _first(self, lease: Lease) -> T:
        """The first request, timed from when it leaves: its delay starts then (before the
        endpoint's p95 is known: once it is, see `Hedger.out`)."""
        self.sent_at = time.monotonic()
        self.loop = loop = asyncio.get_running_loop()
        if self.delay is not None:
            self.timer = loop.call_later(self.delay, self._due)
        self._hedger.out(self)
        return await self._attempt(lease)

    def arm(self) -> None:
        """Time the first request by the delay learned since it left (on its loop; once): due at
        once if it has been out that long already."""
        if self.over or self.delay is not None or self.loop is None:
            return
        delay = self.delay = self._hedger.delay()
        if delay is not None:
            due = max(0.0, self.sent_at + delay - time.monotonic())
            self.timer = self.loop.call_later(due, self._due)

    def wake(self) -> None:
        """Look again now, from any thread (the budget allows its hedge)."""
        loop = self.loop
        if loop is not None and not self.over:
            with contextlib.suppress(RuntimeError):  # its loop has closed
                loop.call_soon_threadsafe(self._due)

    def _due(self) -> None:
        """The delay passed with the first request still out: hedge it if there is room. A loop
        callback, run in a copy of the caller's context (its agent, usage counter, runtime), which
        the hedge's task copies in turn."""
        self._stop_timer()  # when woken by the budget (see `Hedging.spend`), the next look
        if self.over or self.winner is not None or self.task is not None:
            return
        if not self._hedger.may_hedge(self, self._gateway, self._estimated):
            # Looked at again later (a slot may be free then), or woken as soon as the budget
            # allows one more hedge and this is the request out the longest.
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later((self.delay or 0.0) * RECHECK, self._due)
            return
        call = self._call
        # Its own id (its slot events are a request of their own), named after the call's so
        # that what counts a repetition's calls (the engine's watch) sees one call, not two.
        hedge = Call(
            call.agent,
            call.dimension,
            hedge_id(call.call_id),
            time.monotonic(),
            call.usage,
            call.costing,  # a hedge is a request of its own: priced, and within the budget
        )
        events.hedge_sent(
            agent=call.agent,
            dimension=call.dimension,
            call_id=call.call_id,
            hedge_call_id=hedge.call_id,
            after_s=self.delay or 0.0,
        )
        if call.usage is not None:
            call.usage.hedges += 1
        # An asyncio task, not an anyio one: a loop callback has no task for anyio to find its
        # backend by. The hedge makes its cancel scope once it runs.
        self.task = asyncio.get_running_loop().create_task(self._hedge(hedge))

    async def _hedge(self, hedge: Call) -> None:
        """The hedge's task: one request; if it answers first, the first request is cancelled."""
        if self.over:  # the first request ended before this task began
            return
        self.hedge_scope = anyio.CancelScope()  # set before this task first suspends
        with self.hedge_scope:
            try:
                result = await self._gateway._send(
                    self._attempt, hedge, self._estimated, self._usage_of, 0
                )
            except Exception:
                return  # the first request decides (see `run`)
            # Its latency is not learned: hedges that would have answered late are cancelled
            # when the first answers, so those that answer are the fast ones (a p95 learned from
            # them would come down with every hedge, and bring more hedges).
            self.hedge_at = time.monotonic()
            if self.winner is None:
                self.winner, self.hedge_result = "hedge", result
                self._call.handed_on = hedge.handed_on
                self.scope.cancel()
            else:
                await _discard(result)

    def _stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()

    def _learn(self, seconds: float, censored: bool = False) -> None:
        latencies = self._hedger.latencies
        if latencies is not None:
            self._hedger.back(self)  # no longer out: not counted twice
            latencies.add(seconds, censored)

    def _over(self) -> None:
        """Whatever the outcome: no timer left, nothing waited for."""
        self.over = True
        self._stop_timer()
        self._hedger.back(self)
        if self.due:
            self._hedger.hedging.unwait(self)

    async def _end(self) -> None:
        """After a hedge went: the hedge over (cancelled if still out, waited for shielded: its
        slot is released before the call returns), and `hedge_won` said."""
        task = self.task
        if task is None:
            return
        if self.hedge_scope is not None:
            self.hedge_scope.cancel()
        if not task.done():
            with anyio.CancelScope(shield=True):
                await asyncio.wait((task,))
        saved = None
        if self.winner == "hedge":
            if self.first_at:  # the first answered too, just later
                saved = self.first_at - self.hedge_at
            elif self.sent_at:  # cancelled: at least this slow (see `Latencies`)
                self._learn(time.monotonic() - self.sent_at, censored=True)
        if self.winner is not None:
            call = self._call
            events.hedge_won(
                agent=call.agent,
                dimension=call.dimension,
                call_id=call.call_id,
                winner=self.winner,
                saved_s=saved,
            )
