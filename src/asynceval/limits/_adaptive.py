"""Adaptive per-endpoint limits: the arithmetic of `ConcurrencyController`'s AIMD, as state.

A provider that serves fewer calls at once than our limit answers the excess with 429s while it
serves the rest. On such a 429 the endpoint's limit drops to what the provider is shown to serve:
the calls still in flight there that were sent before the refused one (those sent after it are
refused too, or not yet seen: the first 429 of a burst of 10 at a provider serving 3 comes with
9 others out, 6 of them sent after it, so the limit drops to 3 in one cut, not to 9, 8, ... as
each 429 arrives). It does not grow again for the 429's Retry-After. Each success then adds
1/limit (about one slot per round of calls), so the limit probes the provider's cap again. A
drop happens at most once per round trip: the 429s of requests sent before the last drop tell of
the same overload, and do not cut again. A probe refused at the level already learnt doubles the
next hold (up to 32 times the Retry-After) and halves the growth after it: a provider whose cap
does not move is asked ever more rarely (without a Retry-After too), and one whose cap grew (the
limit climbs two past the level) is probed at the normal pace again.

This module holds no lock: the controller calls it under its own.
"""

from __future__ import annotations

from typing import NamedTuple

_MAX_STREAK = 5  # holds double at most this many times: 32 x the Retry-After


class Change(NamedTuple):
    """An endpoint's limit moved from `previous` to `limit` slots."""

    previous: int
    limit: int


class _Endpoint:
    __slots__ = ("cut_at", "level", "limit", "streak", "until")

    def __init__(self, limit: float) -> None:
        self.limit = limit  # fractional: successes add 1/limit
        self.level = 0  # where the last drop took it: the provider's cap as last seen
        self.streak = 0  # drops in a row at (or above) that level, each after a hold ran out
        self.until = 0.0  # no growth before this time.monotonic()
        self.cut_at = 0  # the endpoint's sends counted when the limit last dropped


class AdaptiveLimits:
    """The endpoints whose limit is below `ceiling` (the global limit), and their holds."""

    __slots__ = ("ceiling", "reduced")

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.reduced: dict[str, _Endpoint] = {}

    def limit(self, endpoint: str | None) -> int:
        """The slots `endpoint` may hold at once now."""
        state = self.reduced.get(endpoint) if endpoint is not None else None
        return int(state.limit) if state is not None else self.ceiling

    def room(self, endpoint: str | None, active: int) -> bool:
        """Whether one more slot may go to `endpoint`, which holds `active` now."""
        state = self.reduced.get(endpoint) if endpoint is not None else None
        return state is None or active < int(state.limit)

    def overload(
        self,
        endpoint: str,
        others: int,
        hold: float,
        now: float,
        sent: int | None = None,
        sends: int = 0,
    ) -> Change | None:
        """A 429 while `others` (>= 1) calls to `endpoint` were in flight: drop to those of them
        sent before the refused one (at least 1), as many as the provider is shown to serve.

        At most once per round trip: a 429 for the request that was the endpoint's `sent`-th
        send, when the limit last dropped at its `cut_at`-th or later, answers a request sent
        before that drop, so it is news of the same round and changes nothing. `sends` is the
        endpoint's sends so far (the mark of this drop; those after `sent` still out are not
        counted as served). `sent` None: no such check, and every other call counts."""
        state = self.reduced.get(endpoint)
        if sent is not None:
            if state is not None and sent <= state.cut_at:
                return None  # the same round as the last drop
            others = max(1, others - max(0, sends - sent))
        previous = int(state.limit) if state is not None else self.ceiling
        if state is None:
            state = self.reduced[endpoint] = _Endpoint(float(self.ceiling))
        change = None
        if others < previous:
            if now >= state.until and state.level and others >= state.level:
                state.streak = min(state.streak + 1, _MAX_STREAK)  # the same cap, again
            state.level = others
            state.limit = float(others)
            state.cut_at = sends
            change = Change(previous, others)
        if hold > 0:
            state.until = max(state.until, now + hold * 2**state.streak)
        return change

    def success(self, endpoint: str, now: float) -> Change | None:
        """A call to `endpoint` succeeded: grow by 1/limit unless a hold is running; at or
        above the cap last seen, by half that for each probe refused there in a row."""
        state = self.reduced.get(endpoint)
        if state is None or state.until > now:
            return None
        current = state.limit
        step = 1.0 / current
        if state.streak and int(current) >= state.level:
            step /= 2**state.streak  # probing a cap that refused the last probes: slower
        grown = current + step
        if state.level and int(grown) >= state.level + 2:
            state.streak = state.level = 0  # past the old cap without a 429: it has more now
        if grown >= self.ceiling:
            del self.reduced[endpoint]
        else:
            state.limit = grown
        if int(grown) > int(current):
            return Change(int(current), min(int(grown), self.ceiling))
        return None
