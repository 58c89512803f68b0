"""The simulated provider's bounded memories: attempt indexes (an LRU) and sliding time windows.

Everything here is touched from synchronous code between awaits, possibly by event loops in
several threads sharing one provider, so each structure takes a `threading.Lock` around its few
operations: without it, two threads could both see a non-empty deque and both pop from it.
The lock is never held across an await, so it cannot block an event loop for long.
"""

from __future__ import annotations

import operator
import threading
from array import array
from collections import OrderedDict


class AttemptMemory:
    """Attempt indexes of at most `capacity` distinct requests, the most recently used kept.

    `next(key)` answers how many attempts of `key` came before (0 the first time) and counts
    this one. Once `capacity` keys are remembered, a new key evicts the least recently used:
    a request not seen among the last `capacity` distinct ones starts again at attempt 0.
    That is what keeps a long-running provider from growing with every distinct request body.
    """

    __slots__ = ("_capacity", "_counts", "_lock")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"AttemptMemory capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def next(self, key: bytes) -> int:
        """The attempt index of this attempt of `key` (0 first); `key` becomes the most recent."""
        with self._lock:
            counts = self._counts
            # pop then re-insert: the key moves to the most recent end in one step.
            attempt = counts.pop(key, 0)
            counts[key] = attempt + 1
            if len(counts) > self._capacity:
                counts.popitem(last=False)
            return attempt

    def clear(self) -> None:
        """Forget every attempt index."""
        with self._lock:
            self._counts.clear()

    def __len__(self) -> int:
        """How many distinct keys are remembered (never above the capacity)."""
        return len(self._counts)


class Window:
    """Amounts added over time, summed over the last `span` seconds, and the highest such sum.

    An entry added at time `t` counts while `now - t < span`: `total(now)` and `peak` cover
    half-open windows of `span` seconds. `peak` is the largest sum seen at any `add`, which is
    the largest sum within any window [t, t + span), since the window holding the most can be
    slid to end at its last entry. Memory holds only the entries of the last `span` seconds,
    16 bytes each in two arrays (a deque of tuples took about 90, and the garbage collector
    walked every one of them). Times come from the caller (`time.monotonic()`), so tests may
    pass their own clock.
    """

    __slots__ = ("_amounts", "_head", "_lock", "_span", "_times", "_total", "peak")

    def __init__(self, span: float) -> None:
        if not span > 0:
            raise ValueError(f"Window span must be > 0, got {span!r}")
        self._span = span
        self._times = array("d")  # entries from `_head` on are held; those before, left
        self._amounts = array("q")
        self._head = 0
        self._total = 0
        self._lock = threading.Lock()
        self.peak = 0

    def add(self, now: float, amount: int = 1) -> None:
        """Count `amount` at time `now` (times must not go backwards) and update `peak`."""
        amount = operator.index(amount)  # an int, checked before either array takes anything
        if not -(2**63) <= amount < 2**63:
            raise OverflowError(f"Window amount out of range: {amount}")
        with self._lock:
            self._prune(now)
            self._times.append(now)
            self._amounts.append(amount)
            self._total += amount
            if self._total > self.peak:
                self.peak = self._total

    def total(self, now: float) -> int:
        """The sum of the amounts added within the last `span` seconds before `now`."""
        with self._lock:
            self._prune(now)
            return self._total

    def oldest(self) -> float | None:
        """The time of the oldest entry still held (as of the last prune), None when empty."""
        with self._lock:
            return self._times[self._head] if self._head < len(self._times) else None

    def newest(self) -> float | None:
        """The time of the newest entry still held (as of the last prune), None when empty."""
        with self._lock:
            return self._times[-1] if self._head < len(self._times) else None

    def clear(self) -> None:
        """Forget every entry and restart `peak` from 0."""
        with self._lock:
            self._times, self._amounts, self._head = array("d"), array("q"), 0
            self._total = 0
            self.peak = 0

    def __len__(self) -> int:
        """How many entries are held (those of the last `span` seconds, as of the last prune)."""
        with self._lock:
            return len(self._times) - self._head

    def _prune(self, now: float) -> None:
        # An entry exactly `span` old has left the half-open window (now - span, now].
        cutoff = now - self._span
        times, amounts, head = self._times, self._amounts, self._head
        held = len(times)
        while head < held and times[head] <= cutoff:
            self._total -= amounts[head]
            head += 1
        if head >= 1024 and head * 2 >= held:  # the left entries are most: drop them
            del times[:head]
            del amounts[:head]
            head = 0
        self._head = head
