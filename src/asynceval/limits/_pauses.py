"""Per-endpoint pauses after a rate or quota 429: the state behind `ConcurrencyController.pause`.

A pause stops new grants for one endpoint until its Retry-After passes; overlapping pauses merge
into one. Each waiter sits through at most one pause: one that was already in line when the
previous pause ended is not held by the next (its own retry already waits the Retry-After), so
callers that waited go together when a pause ends instead of one at a time while each of their
429s starts the next pause.

This module holds no lock: the controller calls it under its own.
"""

from __future__ import annotations


class _Pause:
    """One endpoint's pause: the current one's end, and when the last finished pause ended."""

    __slots__ = ("ended_at", "until")

    def __init__(self) -> None:
        self.until = 0.0
        self.ended_at = float("-inf")


class Pauses:
    """The endpoints' pauses; times are `time.monotonic()` seconds."""

    __slots__ = ("_by_endpoint",)

    def __init__(self) -> None:
        self._by_endpoint: dict[str, _Pause] = {}

    def __bool__(self) -> bool:
        """Whether any endpoint was ever paused (else nothing needs a look)."""
        return bool(self._by_endpoint)

    def pause(self, endpoint: str, seconds: float, now: float) -> None:
        """No grant for `endpoint` before `now + seconds` (merged with a pause running)."""
        self._current(endpoint, now)
        pause = self._by_endpoint.setdefault(endpoint, _Pause())
        pause.until = max(pause.until, now + max(0.0, seconds))

    def end(self, endpoint: str, now: float) -> bool:
        """End `endpoint`'s pause now (its provider answered a call since it began); whether
        one was running. Its waiters go at once, as at a pause's natural end."""
        pause = self._current(endpoint, now)
        if pause is None or not pause.until:
            return False
        pause.until = now
        self._current(endpoint, now)  # over: remembered as ended now
        return True

    def remaining(self, endpoint: str | None, now: float) -> float:
        """Seconds left in `endpoint`'s pause, 0.0 when there is none."""
        pause = self._current(endpoint, now) if endpoint is not None else None
        return max(0.0, pause.until - now) if pause is not None else 0.0

    def hold(self, endpoint: str | None, queued_at: float, now: float) -> float:
        """Seconds a waiter queued at `queued_at` must still wait for its endpoint's pause."""
        if endpoint is None or not self._by_endpoint:
            return 0.0
        pause = self._current(endpoint, now)
        if pause is None or not pause.until or queued_at < pause.ended_at:
            return 0.0  # no pause, or this waiter already sat through the previous one
        return pause.until - now

    def _current(self, endpoint: str, now: float) -> _Pause | None:
        pause = self._by_endpoint.get(endpoint)
        if pause is not None and pause.until and pause.until <= now:
            pause.ended_at = pause.until  # that pause is over: remember when, for `hold`
            pause.until = 0.0
        return pause
