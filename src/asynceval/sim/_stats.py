"""Counters the simulated provider keeps: requests, statuses, in-flight, tokens (`GET /stats`)."""

from __future__ import annotations

from typing import Any

from asynceval.sim._memory import Window


class Stats:
    """Plain counters, updated from one event loop (no locking needed for the integers).

    `requests` counts every request that reached a completion route, answered or not;
    `in_flight` counts requests admitted past the caps and not yet answered, hanging ones
    included; `max_in_flight` is its highest value since the last reset. A reset keeps
    `in_flight` (those requests are still running) and restarts `max_in_flight` from it.

    Rate witnesses over windows of `rate_window` seconds: `window_max_requests` is the most
    requests that arrived (the same requests `requests` counts, 400s and cap 429s included)
    within any window [t, t + rate_window); `window_max_tokens` the most prompt + completion
    tokens of the answers that count towards `tokens`, counted when the answer is sent, within
    any such window. A reset forgets earlier arrivals and answers: both witnesses then cover
    only what came after it. Memory holds only the last `rate_window` seconds of entries.

    `batches` holds a `BatchCounts` per batch API (`BATCH_PROVIDERS`); a reset zeroes them.
    """

    __slots__ = (
        "_answered_tokens",
        "_arrivals",
        "batches",
        "completion_tokens",
        "in_flight",
        "max_in_flight",
        "prompt_tokens",
        "requests",
        "statuses",
    )

    def __init__(self, rate_window: float = 60.0) -> None:
        self.requests = 0
        self.statuses: dict[int, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._arrivals = Window(rate_window)
        self._answered_tokens = Window(rate_window)
        self.batches = {provider: BatchCounts() for provider in BATCH_PROVIDERS}

    def arrive(self, now: float) -> None:
        """A request reached a completion route at `now` (`time.monotonic()`)."""
        self.requests += 1
        self._arrivals.add(now)

    def answered(self, now: float, prompt: int, completion: int) -> None:
        """A readable 200 answer with this usage was sent at `now` (`time.monotonic()`)."""
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self._answered_tokens.add(now, prompt + completion)

    def record(self, status: int) -> None:
        """Count one answer sent with `status`."""
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def enter(self) -> None:
        """A request was admitted and is now in flight."""
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight

    def leave(self) -> None:
        """An in-flight request was answered, or abandoned by its client."""
        self.in_flight -= 1

    def reset(self) -> None:
        """Zero the counters and the rate witnesses, keeping the requests still in flight."""
        self.requests = 0
        self.statuses = {}
        self.max_in_flight = self.in_flight
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._arrivals.clear()
        self._answered_tokens.clear()
        for counts in self.batches.values():
            counts.reset()

    def snapshot(self) -> dict[str, Any]:
        """The `GET /stats` document (status codes as string keys, in ascending order), with
        the batch APIs' counters per provider under `batches` (see `BatchCounts`)."""
        document: dict[str, Any] = {
            "requests": self.requests,
            "statuses": {str(code): n for code, n in sorted(self.statuses.items())},
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "window_max_requests": self._arrivals.peak,
            "window_max_tokens": self._answered_tokens.peak,
        }
        document["batches"] = {name: c.snapshot() for name, c in self.batches.items()}
        return document


BATCH_PROVIDERS = ("openai", "anthropic")
"""The batch APIs the provider serves, as named in `GET /stats`' `batches`."""


class BatchCounts:
    """What one provider's batch API was given and answered, since the last reset.

    `created` counts the batches created (a refused create is not one), `lines` the requests
    they held, one per line whatever became of it: a line submitted twice counts twice.
    The outcomes count lines once their batch has ended and was looked at: `succeeded`,
    `errored` (an error answer: an injected 500, or a 400 for a request the live route refuses
    too), `expired` and `canceled`; `failed` counts the batches that fail (OpenAI's status
    `failed`, Anthropic's with every request errored), when they are created. `tokens` sums
    the usage of the succeeded lines, apart from the live routes' `tokens`.
    """

    __slots__ = (
        "canceled",
        "completion_tokens",
        "created",
        "errored",
        "expired",
        "failed",
        "lines",
        "prompt_tokens",
        "succeeded",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter."""
        self.created = 0
        self.lines = 0
        self.succeeded = 0
        self.errored = 0
        self.expired = 0
        self.canceled = 0
        self.failed = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def snapshot(self) -> dict[str, Any]:
        """The counters as `GET /stats` shows them under `batches.<provider>`."""
        return {
            "created": self.created,
            "lines": self.lines,
            "succeeded": self.succeeded,
            "errored": self.errored,
            "expired": self.expired,
            "canceled": self.canceled,
            "failed": self.failed,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
        }
