"""Costing: what one call costs, and its share of the run's budget (DESIGN section 15).

A route finds the price of each request's model once (`Pricing`: the caller's own `price=`,
else the runtime's `Prices`: LLM_PRICES_FILE, the simulator's, genai-prices'), and gives the
gateway a `Costing` per call: the model, its price (None: unpriced), the bounds of the call's
worst case and the run's budget. Each request (a retry's, a hedge's) then reserves its worst
case against the budget before it is sent and is priced from the usage its answer reports when
its lease is released, onto its `released` event and the repetition's usage.

The worst case: at most one prompt token per byte of the request body (a tokenizer's tokens are
at least a byte of text each, and the body holds the prompt, its tools and its JSON around them;
an image counts as its URL's bytes, which is no bound), plus the output cap the request asks for
(max_tokens, max_completion_tokens, max_output_tokens: a whole number >= 1; a smaller one bounds
nothing, as a provider that answers it at all ignores it), else the model's (`Price.output_cap`),
no more than the model's own output limit when it has one, and for each of the `n` choices a
chat completion asks for.
A request sent and never answered (timed out, cancelled, its connection lost) may still be
billed: it counts at its worst case (`cost_unknown` on its event).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..config import Lane
from ..errors import ConfigError
from ..limits import CostBudget, current_budget

if TYPE_CHECKING:
    from ..runtime import Price, Prices

_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


class Costing:
    """One call's price and budget (see the module); shared by its requests."""

    __slots__ = ("budget", "choices", "model", "output_cap", "price", "prompt_bound")

    def __init__(
        self,
        model: str,
        price: Price | None,
        prompt_bound: int,
        output_cap: int | None,
        budget: CostBudget | None,
        choices: int = 1,
    ) -> None:
        self.model = model
        self.price = price
        self.prompt_bound = prompt_bound
        self.output_cap = output_cap  # per choice; None: the model's
        self.budget = budget
        self.choices = choices  # the answers a request asks for (a chat completion's `n`)

    def worst_case(self) -> Decimal:
        """The most one request of this call can cost (0 when unpriced)."""
        price = self.price
        if price is None:
            return Decimal(0)
        cap = self.output_cap
        if cap is None:
            cap = price.output_cap(self.prompt_bound)
        elif price.max_output_tokens is not None:
            cap = min(cap, price.max_output_tokens)  # the model answers no more than that
        return price.worst_case(self.prompt_bound, cap * self.choices)


class Pricing:
    """A route's prices: per model, found once (from any thread), in the route's `lane` (live,
    flex or batch: genai-prices' price variant). `own` is the caller's price for every model it
    sends (a model's `price=`); `base_url` tells genai-prices the provider."""

    __slots__ = ("_base_url", "_found", "_lock", "_own", "_prices", "lane")

    def __init__(
        self,
        prices: Prices,
        base_url: str | None,
        own: Price | None = None,
        lane: Lane = "live",
    ) -> None:
        self._prices = prices
        self._base_url = base_url
        self._own = own
        self.lane = lane
        self._found: dict[str, Price | None] = {}
        self._lock = threading.Lock()

    def price(self, model: str) -> Price | None:
        """`model`'s price, or None."""
        if self._own is not None:
            return self._own
        try:
            return self._found[model]
        except KeyError:
            pass
        found = self._prices.price(model, base_url=self._base_url, lane=self.lane)
        with self._lock:
            self._found[model] = found
        return found

    def costing(self, content: bytes, body: Any) -> Costing | None:
        """A call's `Costing` from its request body (None: not a model call, e.g. a body with
        no model). Under a budget, a call whose model has no price is refused: its cost could
        not be bounded."""
        if not isinstance(body, Mapping):
            return None
        model = body.get("model")
        if not isinstance(model, str):
            return None
        price = self.price(model)
        budget = current_budget()
        if budget is not None and price is None:
            raise ConfigError(
                f"the model {model!r} has no price, so a budget (MAX_COST_USD / --max-cost) "
                "cannot bound its calls: give its price in LLM_PRICES_FILE (or price= on the "
                "model), or run without a budget"
            )
        cap = None
        for key in _CAPS:
            value = body.get(key)
            if type(value) is int and value >= 1:  # below 1 bounds nothing
                cap = value
                break
        choices = body.get("n")
        if type(choices) is not int or choices < 1:
            choices = 1
        return Costing(model, price, len(content), cap, budget, choices)
