"""What a provider says besides its answer, as one gateway acts on it: rate-limit headers and
the 429s that refuse a call.

Every answer's headers go through `Signals.heard` (the lease's `on_answer`), before its body is
read: announced limits become the endpoint's windows, the budget left is kept, and an answer that
says a budget is spent pauses the endpoint until its reset (`endpoint_paused`, "announced").
Once an endpoint has announced something, each send first waits out a budget its requests have
used up (`acquire`), then takes its turn in the learned windows. A reset is read as at most a
minute away, and a success received during a pause ends it when its answer carries no rate
headers (the budget kept is dropped too: a gateway that adds rate headers only to its own 429s
would otherwise never say the budget is whole again) or is the freshest answer and says a budget
is left: the provider is answering.

A 429 is one of two things (`refused`). A rate refusal: its headers say a budget is spent, or no
other call was in flight; the endpoint pauses for its Retry-After (`endpoint_paused`, "rate")
and the adaptive limit stays. Or an overload: no such headers, beside other calls in flight;
the limit drops to what the provider served, once per round trip, and the call goes again from
the front of the line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import anyio

from .. import events
from ..errors import RateLimited
from ..limits import ConcurrencyController, ProviderRates, RateLimiter, read_rate_headers
from ._lease import Lease

_LOOK_AGAIN_S = 0.25
"""How often a send waiting out a spent budget looks whether a success ended it."""


class Signals:
    """One gateway's endpoint, its controller and that endpoint's `ProviderRates`."""

    __slots__ = ("controller", "endpoint", "max_delay", "on_answer", "rates")

    def __init__(
        self,
        controller: ConcurrencyController,
        endpoint: str,
        max_delay: float,
        rates: ProviderRates | None = None,
        fixed: RateLimiter | None = None,
    ) -> None:
        """`rates`: the endpoint's shared ones (the runtime's); None builds this gateway's own,
        learning each dimension that `fixed` (the settings' windows) leaves unlimited.
        `max_delay` caps every pause (a wild reset or Retry-After cannot stall a run)."""
        self.controller = controller
        self.endpoint = endpoint
        self.max_delay = max_delay
        if rates is None:
            rates = ProviderRates(
                endpoint,
                learn_requests=fixed is None or fixed.requests_per_minute is None,
                learn_tokens=fixed is None or fixed.tokens_per_minute is None,
            )
        self.rates = rates
        # Bound once: setting it on each lease allocates nothing.
        self.on_answer: Callable[[Lease, Mapping[str, str]], None] = self.heard

    def heard(self, lease: Lease, headers: Mapping[str, str]) -> None:
        """An answer to `lease`'s request came with `headers` (any status)."""
        said = read_rate_headers(headers)
        if said is None:
            # The common case for a provider that announces nothing: a look at one attribute.
            if self.rates.active and self._succeeded(lease):
                self.answering()
            return
        sends = self.controller.sends(self.endpoint)
        pause = self.rates.heard(said, lease.sent_seq, sends, time.monotonic())
        if pause > 0:
            if "retry-after-ms" not in headers and "retry-after" not in headers:
                self.pause(pause, "announced")  # (a refusal's Retry-After is `refused`'s)
        elif self._succeeded(lease) and not said.empty and self.rates.freshest(lease.sent_seq):
            self.controller.resume(self.endpoint)  # the freshest answer: a budget is left

    async def acquire(self, lease: Lease, tokens: int) -> None:
        """Before `lease`'s request leaves: wait out a budget the endpoint's sends have spent
        (pausing the endpoint meanwhile, so the line does not take slots to wait in), then
        take a turn in the learned windows (given back with the lease)."""
        rates, controller, endpoint = self.rates, self.controller, self.endpoint
        wait = rates.wait(controller.sends(endpoint), time.monotonic())
        if wait > 0:
            wait = min(wait, self.max_delay)
            self.pause(wait, "announced")
            end = time.monotonic() + wait
            while True:  # looked at again: a success meanwhile (`answering`) ends the wait
                now = time.monotonic()
                left = min(end - now, rates.wait(controller.sends(endpoint), now))
                if left <= 0:
                    break
                await anyio.sleep(min(left, _LOOK_AGAIN_S))
        reservation = await rates.acquire(tokens)
        if reservation is not None:
            lease._learned = reservation
            lease._learned_window = rates.window

    @staticmethod
    def _succeeded(lease: Lease) -> bool:
        status = lease._status
        return status is not None and status < 400

    def answering(self) -> None:
        """A call succeeded with an answer that announced nothing: a budget kept from an
        earlier announcement is stale, and a pause running ends (the provider is answering)."""
        self.rates.forget()
        self.controller.resume(self.endpoint)

    def refused(self, error: RateLimited, lease: Lease) -> bool:
        """`lease`'s request got the 429 `error`: True when it is an overload (send it again
        from the front of the line), else the endpoint is paused for its Retry-After."""
        wait = min(error.retry_after or 0.0, self.max_delay)
        if not error.budget_empty and self.controller.overloaded(
            self.endpoint, hold=wait, sent=lease.sent_seq
        ):
            return True
        self.pause(wait, "rate")
        return False

    def pause(self, seconds: float, reason: str) -> None:
        """Pause the endpoint for `seconds` (capped); `endpoint_paused` when that starts a pause
        or makes the running one longer, not for every answer that repeats it."""
        seconds = min(seconds, self.max_delay)
        if seconds <= 0:
            return
        controller, endpoint = self.controller, self.endpoint
        before = controller.cooldown_remaining(endpoint)
        controller.pause(endpoint, seconds)
        if seconds > before + 0.001:
            events.endpoint_paused(endpoint=endpoint, seconds=seconds, reason=reason)


def flex_unavailable(error: RateLimited) -> bool:
    """Whether a 429 is OpenAI flex processing's "resource unavailable": the flex tier has no
    capacity for the request now, which says nothing about how many calls we send (DESIGN
    section 16): retried with backoff, the endpoint neither paused nor its limit lowered."""
    text = f"{error.message} {error.body or ''}".lower()
    return "resource_unavailable" in text or "resource unavailable" in text
