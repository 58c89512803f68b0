"""Counters the simulated provider keeps: requests, statuses, in-flight, tokens (`GET /stats`)."""

from __future__ import annotations

from typing import Any


class Stats:
    """Plain counters, updated from one event loop (no locking needed).

    `in_flight` counts requests admitted past the caps and not yet answered, hanging ones included;
    `max_in_flight` is its highest value since the last reset. A reset keeps `in_flight` (those
    requests are still running) and restarts `max_in_flight` from it.
    """

    __slots__ = (
        "completion_tokens",
        "in_flight",
        "max_in_flight",
        "prompt_tokens",
        "requests",
        "statuses",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.statuses: dict[int, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

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
        """Zero the counters, keeping the requests still in flight."""
        self.requests = 0
        self.statuses = {}
        self.max_in_flight = self.in_flight
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def snapshot(self) -> dict[str, Any]:
        """The `GET /stats` document (status codes as string keys, in ascending order)."""
        return {
            "requests": self.requests,
            "statuses": {str(code): n for code, n in sorted(self.statuses.items())},
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
        }
