"""What a provider's rate-limit headers say: its per-minute limits, the budget left, and when
the budget is whole again.

Two dialects are read. OpenAI sends `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` on
every answer, its resets as Go durations ("1s", "6m0s", "20ms", "1m30.5s": the time until the
budget is fully restored). Anthropic sends
`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`, its
resets as RFC 3339 times. Limits are per minute in both. Anthropic's input- and output-token
budgets count for `empty` (a 429 that says one of them is spent is a rate refusal) but are not
learned as a token limit: the funnel's token window counts prompt and completion together.

A reset further away than `MAX_RESET_S` is read as that: a per-minute budget is whole again
within its minute, and a reset a year away (a daily quota's, a gateway's odd value, Anthropic's
`9999-12-31`) must not stop an endpoint for the rest of a run; the next answer says again.

Reading never raises: a malformed value is as if absent, and an answer with none of these
headers costs four lookups (`read_rate_headers` returns None): an answer is taken to announce
when it has a requests or tokens `remaining` header of its dialect (both providers send those
on every answer), and its other headers are read only then.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import NamedTuple

_OPENAI = "x-ratelimit-"
_ANTHROPIC = "anthropic-ratelimit-"
# One header of each dimension per dialect: an answer that has none of them says nothing.
_MARKERS = (
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-remaining",
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_Reset = Callable[[str | None], float | None]
MAX_RESET_S = 60.0
"""The furthest announced reset kept, in seconds: the window of a per-minute limit."""
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class Budget(NamedTuple):
    """One dimension's budget as announced: the limit per minute, what is left of it, and the
    seconds from the answer until it is whole again (None for a value absent or unreadable)."""

    limit: int | None
    remaining: int | None
    reset: float | None

    @property
    def empty(self) -> bool:
        """Whether the headers say nothing is left (remaining 0)."""
        return self.remaining == 0


_NOTHING = Budget(None, None, None)


class Announcement(NamedTuple):
    """What one answer's rate-limit headers say (`dialect`: "openai" or "anthropic").

    `requests` and `tokens` are the budgets the funnel's windows can keep; `refill` is, when
    some budget is spent (any dimension, Anthropic's input and output tokens included), the
    seconds until the last spent one is whole again (0.0 when none says when), else None."""

    dialect: str
    requests: Budget
    tokens: Budget
    refill: float | None

    @property
    def empty(self) -> bool:
        """Whether some budget is spent: a 429 with these headers is a rate refusal."""
        return self.refill is not None


def read_rate_headers(headers: Mapping[str, str]) -> Announcement | None:
    """The announcement in `headers` (names as any case-insensitive mapping or lower-case
    dict has them), or None when they carry no rate-limit header."""
    openai, anthropic = _MARKERS[0] in headers or _MARKERS[1] in headers, False
    if not openai:
        anthropic = _MARKERS[2] in headers or _MARKERS[3] in headers
        if not anthropic:
            return None
    if openai:
        requests = _budget(headers, _OPENAI, "-requests", _duration)
        tokens = _budget(headers, _OPENAI, "-tokens", _duration)
        return Announcement("openai", requests, tokens, _refill((requests, tokens)))
    now = time.time()

    def until(text: str | None) -> float | None:
        return _until(text, now)

    requests = _budget(headers, _ANTHROPIC + "requests", "", until)
    tokens = _budget(headers, _ANTHROPIC + "tokens", "", until)
    parts = (
        _budget(headers, _ANTHROPIC + "input-tokens", "", until),
        _budget(headers, _ANTHROPIC + "output-tokens", "", until),
    )
    return Announcement("anthropic", requests, tokens, _refill((requests, tokens, *parts)))


def _budget(headers: Mapping[str, str], head: str, tail: str, reset: _Reset) -> Budget:
    """OpenAI names are `head + {limit,remaining,reset} + tail`; Anthropic's `head + -{...}`."""
    if tail:
        names = (f"{head}limit{tail}", f"{head}remaining{tail}", f"{head}reset{tail}")
    else:
        names = (f"{head}-limit", f"{head}-remaining", f"{head}-reset")
    limit, remaining = _count(headers.get(names[0])), _count(headers.get(names[1]))
    if limit is None and remaining is None:
        return _NOTHING
    seconds = reset(headers.get(names[2]))
    return Budget(limit, remaining, None if seconds is None else min(seconds, MAX_RESET_S))


def _refill(budgets: tuple[Budget, ...]) -> float | None:
    spent = [b.reset or 0.0 for b in budgets if b.empty]
    return max(spent) if spent else None


def finite_number(text: str | None) -> float | None:
    """A finite number from a header value (" 40 ", "1.5"), else None ("inf" and "nan" are no
    count, wait or price): the one reading of a number in a provider's headers."""
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _count(text: str | None) -> int | None:
    """A non-negative whole number ("40", " 40 ", "40.0"), else None."""
    number = finite_number(text)
    if number is None or number < 0 or number != int(number):
        return None
    return int(number)


def _duration(text: str | None) -> float | None:
    """Seconds in a Go duration ("1s", "6m0s", "20ms", "1m30.5s") or a bare number of seconds;
    None when unreadable or negative."""
    if text is None:
        return None
    text = text.strip()
    seconds = finite_number(text)
    if seconds is not None:
        return seconds if seconds >= 0 else None
    total, at = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != at:
            return None  # something between two parts: not a duration
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        at = match.end()
    return total if at and at == len(text) and math.isfinite(total) else None


def _until(text: str | None, now: float) -> float | None:
    """Seconds from `now` (wall clock) to an RFC 3339 time, at least 0; None when unreadable."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip().upper())  # RFC 3339 allows "t", "z"
    except ValueError:
        return None
    if when.tzinfo is None:
        return None  # a time without a zone is no time at all
    return max(0.0, when.timestamp() - now)
