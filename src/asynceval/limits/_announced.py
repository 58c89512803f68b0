"""What one endpoint's answers announced of its rate limits, kept as the limits its calls meet.

A provider's rate-limit headers (`asynceval.limits._rate_headers`) say two things, and both are
kept here:

- its limits per minute: where LLM_REQUESTS_PER_MINUTE / LLM_TOKENS_PER_MINUTE leave a dimension
  unset, the endpoint gets a sliding window of the announced limit (a `RateLimiter`, widened or
  narrowed in place when the announcement changes), so its calls are paced before 429s come;
- the budget left until its reset: an answer to the request that was the endpoint's n-th send,
  saying R requests remain, means that at most R - (sends since the n-th) more may go before
  the reset. The freshest such answer (the latest-sent request's) is the one kept. This is the
  window's seeding with what the provider already counts (other processes' calls, an earlier
  run's, the requests of this run sent before the first answer): a run that starts with 40 of
  120 left sends 40, then waits for the reset. After the reset nothing is known until the next
  answer, and the window alone paces. A reset is at most a minute away (`MAX_RESET_S`), and a
  success that carries no rate headers (`forget`) drops the budget kept: the provider is
  answering, and a gateway that adds its headers only to its own 429s never says again that the
  budget is whole.

Sends are counted by the controller (`ConcurrencyController.sending` numbers them), so the
count costs nothing more per call; nothing here runs for an endpoint that announced nothing.
"""

from __future__ import annotations

import threading
import time

from .. import events
from ._rate_headers import Announcement
from .rate import RateLimiter, Reservation

WINDOW_S = 60.0
"""Announced limits are per minute in both dialects."""


class ProviderRates:
    """One endpoint's announced limits and budget (see the module). Thread-safe.

    `learn_requests` / `learn_tokens`: whether announced limits of that dimension are kept (a
    setting, which always wins, leaves it False). `active` turns True with the first
    announcement; before it, `acquire` is never called (a plain attribute read per call).
    """

    __slots__ = (
        "_left",
        "_lock",
        "_seq",
        "_until",
        "active",
        "endpoint",
        "learn_requests",
        "learn_tokens",
        "requests_per_minute",
        "tokens_per_minute",
        "window",
    )

    def __init__(self, endpoint: str, *, learn_requests: bool, learn_tokens: bool) -> None:
        self.endpoint = endpoint
        self.learn_requests = learn_requests
        self.learn_tokens = learn_tokens
        self.active = False
        self.window: RateLimiter | None = None  # the learned limits' windows
        self.requests_per_minute: int | None = None
        self.tokens_per_minute: int | None = None
        self._left = 0  # requests the freshest answer said were left ...
        self._seq = 0  # ... as of the endpoint's send with this number ...
        self._until = 0.0  # ... until this time.monotonic() (0: no budget known)
        self._lock = threading.Lock()

    def heard(self, said: Announcement, sent: int, sends: int, now: float) -> float:
        """Take in one answer's announcement; `sent` is the answered request's number among
        the endpoint's sends, `sends` the sends so far. Returns the seconds the endpoint should
        pause because the answer says a budget is spent (0.0: no pause; an older answer than
        the freshest one kept decides nothing)."""
        with self._lock:
            learned = self._learn(said)
            fresh = sent >= self._seq
            if fresh:
                self._seq = sent
                budget = said.requests
                if budget.remaining is not None and budget.reset is not None:
                    self._left, self._until = budget.remaining, now + budget.reset
                else:
                    self._until = 0.0
            self.active = True
        if learned:
            events.rate_learned(
                endpoint=self.endpoint,
                requests_per_minute=self.requests_per_minute,
                tokens_per_minute=self.tokens_per_minute,
                remaining_requests=said.requests.remaining,
                remaining_tokens=said.tokens.remaining,
                dialect=said.dialect,
            )
        return (said.refill or 0.0) if fresh else 0.0

    def _learn(self, said: Announcement) -> bool:
        """Keep the announced per-minute limits (lock held); whether one is new or changed."""
        requests = said.requests.limit if self.learn_requests else None
        tokens = said.tokens.limit if self.learn_tokens else None
        if requests == 0:
            requests = None  # a limit of nothing is no pace to keep (remaining 0 pauses)
        if tokens == 0:
            tokens = None
        changed = (requests is not None and requests != self.requests_per_minute) or (
            tokens is not None and tokens != self.tokens_per_minute
        )
        if not changed:
            return False
        self.requests_per_minute = requests or self.requests_per_minute
        self.tokens_per_minute = tokens or self.tokens_per_minute
        if self.window is None:
            self.window = RateLimiter(
                requests_per_minute=self.requests_per_minute,
                tokens_per_minute=self.tokens_per_minute,
                window_s=WINDOW_S,
            )
        else:
            self.window.relimit(requests_per_minute=requests, tokens_per_minute=tokens)
        return True

    def freshest(self, sent: int) -> bool:
        """Whether the answer to the endpoint's `sent`-th send is the freshest one kept."""
        return sent >= self._seq

    def forget(self) -> bool:
        """A call succeeded and its answer announced nothing: drop the budget kept (see the
        module). Whether one was kept until later than now (a pause it started is stale)."""
        with self._lock:
            kept, self._until = self._until, 0.0
        return kept > time.monotonic()

    def wait(self, sends: int, now: float) -> float:
        """Seconds before one more request may go by the budget kept (0.0: it may go now), when
        the endpoint has sent `sends` requests so far."""
        with self._lock:
            if self._until <= now or self._left - (sends - self._seq) > 0:
                return 0.0
            return self._until - now

    async def acquire(self, tokens: int) -> Reservation | None:
        """Wait for the learned windows' turn for one request of `tokens` (estimated), if any
        limit was learned; the reservation goes back through `settle` / `refund` as usual."""
        window = self.window
        if window is None:
            return None
        return await window.acquire(tokens)
