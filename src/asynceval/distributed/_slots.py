"""The cluster-wide half of the LLM-call limit: leases of one `distributed.Semaphore` per run.

Each worker process takes its own FIFO slot first (`ConcurrencyController`), then a lease of
the run's semaphore, so at most a worker's local share of callers waits on the cluster. Leases
are Dask's: refreshed by the semaphore while held, handed back by the scheduler after the lease
timeout when their worker dies.

A round trip to the scheduler per call would cost both sides more CPU than the call itself, so
a worker keeps the leases it has while its own callers wait for them: a lease given back here
goes straight to the next local waiter. So that a busy worker cannot keep a share forever from
the others, a lease held longer than `ROTATE_S` goes back to the scheduler when it is given
back, and a free lease nobody here wants goes back after `LINGER_S`.

A rate 429's pause is known where leases are granted before a lease goes back (DESIGN section
17): this worker's own pause (`paused`) is known here at once and sent to the scheduler, and
every lease this worker returns waits until the scheduler has it (`_grants`: it has told every
worker by then, and each grant carries the pauses in force). A caller waiting here for a
paused endpoint holds its worker's own slot, which calls to other endpoints could use: one that
came through `ClusterController` gives it back and waits out the pause in its worker's line,
from the front; any other keeps its place here but is skipped until the pause ends. While only
such callers wait, no lease is asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from ..errors import RunFinished
from ._controller import _Bounced, asking_for
from ._grants import LEASE, PAUSE

_POLL_S = 0.5
"""How long one acquire request waits at the scheduler before it asks again."""
ROTATE_S = 1.0
LINGER_S = 0.05
MAX_ASKING = 4
CLOSE_WAIT_S = 2.0
ANNOUNCE_WAIT_S = 2.0
"""How long a lease going back waits for the scheduler to take this worker's pause in (it
answers within `_grants.BROADCAST_WAIT_S` unless it is in trouble)."""
_SAME_S = 0.05
"""A pause heard again (each grant repeats it) that ends within this of the one known here is
that one, a hop later: not news."""


class _Asking:
    """A caller in line for a lease: done when handed one."""

    __slots__ = ("bounce", "endpoint", "future")

    def __init__(self, future: asyncio.Future[None], endpoint: str | None, bounce: bool) -> None:
        self.future = future
        self.endpoint = endpoint
        self.bounce = bounce  # whether a pause sends it back to its worker's line


class ClusterSlots:
    """`SharedLimit` over one `distributed.Semaphore` (see the module). Its state lives on the
    worker's loop; `release` and `paused` may come from any thread. `on_pause` applies a pause
    heard from the scheduler (another worker's 429) to this worker's controller."""

    def __init__(
        self,
        semaphore: Any,
        loop: asyncio.AbstractEventLoop,
        run_id: str,
        on_pause: Callable[[str, float], None] | None = None,
    ) -> None:
        self._semaphore = semaphore
        self._loop = loop
        self._run = run_id
        self._on_pause = on_pause
        self._held: deque[tuple[str, float]] = deque()  # every lease here, oldest first
        self._free = 0  # of those, how many no call is using
        self._waiters: deque[_Asking] = deque()
        self._pauses: dict[str, float] = {}  # endpoint -> end (monotonic), as known here
        self._announcing: set[asyncio.Task[None]] = set()  # this worker's pauses on their way
        self._getting = 0  # requests out at the scheduler
        self._trim: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._thread = threading.get_ident()
        self._closed = False
        self._settled: anyio.Event | None = None  # set at each change, once closing

    def paused(self, endpoint: str, seconds: float) -> None:
        """This worker's 429 paused `endpoint` (`ConcurrencyController.pause`, before the
        refused call gives its slot back): known here at once, and sent to the scheduler, which
        tells every worker; no lease goes back from here before it has answered."""
        self._on_loop(self._announce, endpoint, seconds)

    def learned(self, endpoint: str, seconds: float) -> None:
        """Another worker's pause, from the scheduler: here and in this worker's controller."""
        self._on_loop(self._learn, endpoint, seconds)

    def _on_loop(self, work: Callable[[str, float], None], endpoint: str, seconds: float) -> None:
        """`work` now on the loop's thread, else queued to it: behind this thread's earlier
        calls and ahead of its later ones (a pause ahead of the release that follows it)."""
        if threading.get_ident() == self._thread:
            work(endpoint, seconds)
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to pause
                self._loop.call_soon_threadsafe(work, endpoint, seconds)

    def _announce(self, endpoint: str, seconds: float) -> None:
        if self._note(endpoint, seconds):  # (the controller has it: it told us)
            self._bounce_line(endpoint)
        task = self._loop.create_task(self._send_pause(endpoint, seconds))
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _send_pause(self, endpoint: str, seconds: float) -> None:
        scheduler = self._semaphore.scheduler
        # Not answered (the scheduler is in trouble): the leases go back anyway, at most this
        # much later; the grants still carry the pause if it arrives.
        with anyio.move_on_after(ANNOUNCE_WAIT_S), contextlib.suppress(Exception):
            await getattr(scheduler, PAUSE)(run=self._run, endpoint=endpoint, seconds=seconds)

    def _learn(self, endpoint: str, seconds: float) -> None:
        if self._note(endpoint, seconds):
            if self._on_pause is not None:
                self._on_pause(endpoint, seconds)  # first: the callers sent back find it there
            self._bounce_line(endpoint)

    def _bounce_line(self, endpoint: str) -> None:
        """The callers in line for `endpoint`, now paused, that can wait it out in their
        worker's line go there (their own slots free for other endpoints meanwhile)."""
        for waiter in [w for w in self._waiters if w.bounce and w.endpoint == endpoint]:
            self._waiters.remove(waiter)
            if not waiter.future.done():
                waiter.future.set_exception(_Bounced())

    def _bounce(self, endpoint: str | None) -> None:
        """Send a caller that arrives for a paused endpoint back to its worker's line, which is
        made to hold the pause as long as it is known here (so it does not come straight back)."""
        left = self._left(endpoint)
        if endpoint is not None and self._on_pause is not None:
            self._on_pause(endpoint, left)
        raise _Bounced

    def _note(self, endpoint: str, seconds: float) -> bool:
        """`endpoint` is paused for `seconds` from now; whether that is news here. Its callers
        in line are skipped until then; the pause's end hands them what is free."""
        until = time.monotonic() + seconds
        if seconds <= 0 or until <= self._pauses.get(endpoint, 0.0) + _SAME_S:
            return False
        self._pauses[endpoint] = until
        self._loop.call_later(seconds, self._pause_over)
        return True

    def _left(self, endpoint: str | None) -> float:
        """Seconds left of `endpoint`'s pause as known here (an ended one is forgotten)."""
        until = self._pauses.get(endpoint) if endpoint is not None else None
        if until is None or endpoint is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self._pauses[endpoint]
        return max(left, 0.0)

    def _pause_over(self) -> None:
        """A pause has ended: its callers may have what is free, and ask for more. Looked at
        again if one is still left (a timer may fire a hair early, by the loop's clock
        resolution: its callers must not then wait for a lease forever)."""
        self._serve()
        self._get_more()
        left = [self._left(endpoint) for endpoint in list(self._pauses)]
        if any(left):
            self._loop.call_later(min(x for x in left if x), self._pause_over)

    @property
    def holding(self) -> bool:
        """Whether any lease is still held here (in use or free)."""
        return bool(self._held)

    async def acquire(self, endpoint: str | None = None) -> None:
        """A lease for a call to `endpoint`, in line order, skipping the line while that
        endpoint is paused. Without `endpoint`, for the call `ClusterController` is taking a
        slot for, which a pause sends back to its worker's line instead (`_Bounced`)."""
        bounce = False
        if endpoint is None and (asked := asking_for.get()) is not None:
            (endpoint,), bounce = asked, True
        if self._closed:
            raise RunFinished("the run has ended on this worker: no more LLM calls")
        if self._pauses and self._left(endpoint):
            if bounce:
                self._bounce(endpoint)
        elif self._free and not self._waiters:
            self._free -= 1
            return
        waiter = _Asking(self._loop.create_future(), endpoint, bounce)
        self._waiters.append(waiter)
        self._serve()  # a lease kept free while only callers for a paused endpoint waited
        self._get_more()
        future = waiter.future
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._given_back()  # handed a lease, then cancelled: it is free again
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """A call is done with its lease; from any thread, without waiting."""
        if threading.get_ident() == self._thread:
            self._given_back()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the lease times out
                self._loop.call_soon_threadsafe(self._given_back)

    def _given_back(self) -> None:
        if self._closed and self._held:
            self._return(self._held.popleft()[0])
            return
        if self._held and time.monotonic() - self._held[0][1] > ROTATE_S:
            self._return(self._held.popleft()[0])  # the others' turn; our waiters ask again
            self._get_more()
            return
        self._hand_on()

    def _hand_on(self) -> None:
        """One more lease is free here: to the first local waiter whose endpoint is not paused,
        else kept for `LINGER_S`."""
        waiter = self._next()
        if waiter is not None:
            waiter.future.set_result(None)
            return
        self._free += 1
        if self._trim is None:
            self._trim = self._loop.call_later(LINGER_S, self._give_back_free)

    def _serve(self) -> None:
        """Free leases to the callers in line that may have them now."""
        while self._free:
            waiter = self._next()
            if waiter is None:
                return
            self._free -= 1
            waiter.future.set_result(None)

    def _next(self) -> _Asking | None:
        """The first caller in line whose endpoint is not paused, taken out of the line."""
        waiters = self._waiters
        if not self._pauses:  # the common case: the head of the line
            while waiters:
                waiter = waiters.popleft()
                if not waiter.future.done():
                    return waiter
            return None
        for waiter in list(waiters):  # a short line: at most this worker's own slots
            if waiter.future.done():
                waiters.remove(waiter)
            elif not self._left(waiter.endpoint):
                waiters.remove(waiter)
                return waiter
        return None

    def _wanting(self) -> int:
        """Callers in line that a lease could go to now."""
        if not self._pauses:
            return len(self._waiters)
        return sum(1 for waiter in self._waiters if not self._left(waiter.endpoint))

    def _give_back_free(self) -> None:
        self._trim = None
        while self._free and self._held:
            self._free -= 1
            self._return(self._held.pop()[0])  # the newest: the oldest rotate out anyway

    def _get_more(self) -> None:
        """A scheduler request out per caller here waiting for a lease, at most `MAX_ASKING`:
        each grant wakes every pending request on the scheduler, so more would only load it."""
        while self._getting < min(self._wanting(), MAX_ASKING):
            self._getting += 1
            self._spawn(self._get())

    async def _get(self) -> None:
        semaphore = self._semaphore
        try:
            await semaphore  # registered once
            lease_id = uuid.uuid4().hex
            while self._wanting() and not self._closed:  # someone here still waits
                try:
                    # Shielded (at most _POLL_S): a grant must never be lost on our side.
                    with anyio.CancelScope(shield=True):
                        granted, pauses = await getattr(semaphore.scheduler, LEASE)(
                            run=self._run,
                            name=semaphore.name,
                            poll_s=_POLL_S,
                            lease_id=lease_id,
                        )
                except Exception:  # no answer: ask again shortly, with the same lease id (a grant
                    await asyncio.sleep(_POLL_S)  # whose reply was lost is then ours again);
                    continue  # if the scheduler is gone for good, the caller ends the run
                for endpoint, seconds in pauses.items():  # those in force where granted
                    self._learn(endpoint, seconds)
                if granted:
                    semaphore._leases.append(lease_id)  # refreshed by the semaphore from now on
                    self._held.append((lease_id, time.monotonic()))
                    self._given_back() if self._closed else self._hand_on()
                    return
        finally:
            self._getting -= 1
            self._changed()

    def _changed(self) -> None:
        if self._settled is not None:
            self._settled.set()

    def _return(self, lease_id: str) -> None:
        self._changed()
        semaphore = self._semaphore
        with contextlib.suppress(ValueError):
            semaphore._leases.remove(lease_id)
        self._spawn(self._send_release(lease_id, set(self._announcing)))

    async def _send_release(self, lease_id: str, after: set[asyncio.Task[None]]) -> None:
        """The lease back to the scheduler, once it has this worker's pauses (`after`, each
        bounded by `ANNOUNCE_WAIT_S`), so it cannot grant it to a call for a paused endpoint."""
        if after:
            await asyncio.wait(after)  # not cancelled with us: each ends on its own
        semaphore = self._semaphore
        with contextlib.suppress(Exception):  # the scheduler is gone: nothing holds the lease
            await semaphore.scheduler.semaphore_release(name=semaphore.name, lease_id=lease_id)

    def _spawn(self, work: Any) -> None:
        task = self._loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def refuse(self) -> None:
        """From now on a call asking for a lease gets `RunFinished`, and so do the callers
        waiting for one; calls holding one finish (the provider is serving them)."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(RunFinished("the run has ended on this worker"))

    async def aclose(self) -> None:
        """The run is over here: stop asking, give back the free leases, and wait a moment
        (`CLOSE_WAIT_S`) for those in use to come back as their calls end (cancelled with the
        run); a lease whose call runs on longer (one a killed caller left running) goes back when
        it ends, and counts against the limit until then."""
        self.refuse()
        with anyio.move_on_after(CLOSE_WAIT_S):
            while True:
                while self._free and self._held:
                    self._free -= 1
                    self._return(self._held.pop()[0])
                if not (self._getting or self._held):
                    break  # requests end within a poll, calls as they can
                self._settled = anyio.Event()
                await self._settled.wait()
        with anyio.move_on_after(CLOSE_WAIT_S):  # the releases reach the scheduler
            for task in list(self._background):
                with contextlib.suppress(BaseException):
                    await task
