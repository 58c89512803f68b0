"""The simulated provider's rate caps (`rpm`, `tpm` per `rate_window`) and the rate-limit
headers that announce them, as OpenAI and Anthropic send theirs.

Every answer of a completion route carries the headers of the caps that are on, in the route's
dialect: OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` on
`/v1/chat/completions` and `/v1/responses`, Anthropic's
`anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` on `/v1/messages`.

- limit: the cap as a rate per minute (`rpm` x 60 / `rate_window`: `--rpm 300 --rate-window 5`
  announces 3600), since both dialects' limits are per minute;
- remaining: what the current window still admits (`rpm` minus the requests admitted in the
  last `rate_window` seconds, this one included; `tpm` minus the tokens answered in it);
- reset: when the window is whole again (the newest entry leaves it): OpenAI as a Go duration
  ("4.95s", "0s"), Anthropic as an RFC 3339 time.

A request over a cap is answered 429 with that budget's remaining at 0, `Retry-After` and
`retry-after-ms` (the time until the oldest entry leaves the window); a 429 for the concurrency
cap carries the same headers with budget left (an overload, not a rate refusal). Tokens count
prompt + completion of each readable answer when it is sent, so a burst admitted together may
go past `tpm`; requests count at admission.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from asynceval.sim._asgi import Header, Message, Send
from asynceval.sim._memory import Window

ANTHROPIC_PATHS = frozenset({"/v1/messages"})


class RateCaps:
    """The caps of one provider; `on` is False when neither is set (then nothing here runs)."""

    __slots__ = ("_admitted", "_tokens", "on", "rpm", "tpm", "window")

    def __init__(self, rpm: int | None, tpm: int | None, window: float) -> None:
        self.rpm, self.tpm, self.window = rpm, tpm, window
        self.on = rpm is not None or tpm is not None
        self._admitted = Window(window)  # admission times, for `rpm`
        self._tokens = Window(window)  # tokens of the answers sent, for `tpm`

    def clear(self) -> None:
        self._admitted.clear()
        self._tokens.clear()

    def refusal(self, now: float) -> tuple[str, float] | None:
        """(message, seconds until the oldest entry leaves) when a cap refuses a request now."""
        for cap, window, what in (
            (self.rpm, self._admitted, "requests"),
            (self.tpm, self._tokens, "tokens"),
        ):
            if cap is not None and window.total(now) >= cap:
                wait = rpm_wait(window.oldest(), now, self.window)
                return f"Simulated rate limit: {cap} {what} per {_per(self.window)}", wait
        return None

    def admit(self, now: float) -> None:
        if self.rpm is not None:
            self._admitted.add(now)

    def spend(self, now: float, tokens: int) -> None:
        if self.tpm is not None:
            self._tokens.add(now, tokens)

    def headers(self, path: str, now: float) -> tuple[Header, ...]:
        """The rate-limit headers of the caps that are on, in `path`'s dialect."""
        anthropic = path in ANTHROPIC_PATHS
        headers: list[Header] = []
        for cap, window, what in (
            (self.rpm, self._admitted, "requests"),
            (self.tpm, self._tokens, "tokens"),
        ):
            if cap is None:
                continue
            limit = b"%d" % max(1, round(cap * 60 / self.window))
            left = b"%d" % max(0, cap - window.total(now))
            newest = window.newest()
            whole_in = 0.0 if newest is None else max(0.0, newest + self.window - now)
            if anthropic:
                head = b"anthropic-ratelimit-" + what.encode()
                reset = _rfc3339(time.time() + whole_in)
                headers += [(head + b"-limit", limit), (head + b"-remaining", left)]
                headers.append((head + b"-reset", reset))
            else:
                tail = b"-" + what.encode()
                headers += [(b"x-ratelimit-limit" + tail, limit)]
                headers += [(b"x-ratelimit-remaining" + tail, left)]
                headers.append((b"x-ratelimit-reset" + tail, _duration(whole_in)))
        return tuple(headers)


def announcing(send: Send, headers: tuple[Header, ...]) -> Send:
    """`send`, adding `headers` to the response's start (for the answers of an admitted request,
    whatever they turn out to be)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message["headers"], *headers]}
        await send(message)

    return sending


def retry_headers(seconds: float) -> tuple[Header, ...]:
    """`Retry-After` in seconds (decimals kept, e.g. "0.05") and `retry-after-ms`."""
    text = f"{seconds:.3f}".rstrip("0").rstrip(".") or "0"
    return ((b"retry-after", text.encode()), (b"retry-after-ms", b"%d" % round(seconds * 1000)))


def rpm_wait(oldest: float | None, now: float, window: float) -> float:
    """Seconds until the oldest entry leaves the window.

    Whole seconds, at least 1, for a window of 1 s or more (HTTP's Retry-After is an integer);
    to the millisecond, at least 1 ms, for a shorter window, where whole seconds would make a
    client wait several windows.
    """
    remaining = window if oldest is None else oldest + window - now
    if window >= 1:
        return max(1, math.ceil(remaining))
    return max(0.001, math.ceil(remaining * 1000) / 1000)


def _per(window: float) -> str:
    """How a refusal names the window: "minute" for 60 s, else e.g. "0.5 s"."""
    return "minute" if window == 60 else f"{window:g} s"


def _duration(seconds: float) -> bytes:
    """A Go duration as OpenAI writes its resets, to the millisecond: "4.95s", "0s"."""
    return (f"{seconds:.3f}".rstrip("0").rstrip(".") + "s").encode()


def _rfc3339(wall: float) -> bytes:
    stamp = datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z").encode()
