"""Prices: what an LLM call costs, in USD (DESIGN section 15; the first step of issue 28).

`Prices.price(model, base_url=..., lane=...)` finds a model's `Price` once: the caller's own
prices first (a price file in genai-prices' vocabulary, `Prices.from_file`, or a mapping), then
the embedded simulated provider's documented price (`SIM_PRICE`), then the price data bundled with
`genai-prices` (pydantic's per-model, per-provider prices, with cached-input, batch and flex
prices). The provider is found from the base URL when genai-prices knows it, else from the model's
name alone (a local gateway serving `gpt-4o-mini` is priced as OpenAI's); a model found nowhere has
no price (None): its calls are unpriced, never $0. genai-prices never fetches newer prices here:
they are those of the installed version, at the time of the lookup.

`Price.cost(prompt_tokens, completion_tokens, cached_tokens)` prices one call with genai-prices'
own unit arithmetic (`calc_unit_price`: a tiered price applies the tier reached by the prompt to
all its tokens), in `Decimal`, unrounded: about a microsecond, where `genai_prices.calc_price`
costs 50-80 us a call (it resolves the model again each time).

genai-prices is imported on the first lookup, not with `import asynceval`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Lane
from ..errors import ConfigError

if TYPE_CHECKING:
    from genai_prices.types import TieredPrices


_CONTEXTS: dict[str, dict[str, str] | None] = {
    "live": None,
    "batch": {"processing": "batch"},
    "flex": {"service_tier": "flex"},
}
_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
"""The price keys a price file may give, in genai-prices' vocabulary (USD per million tokens)."""
_LIMITS = ("context_window", "max_output_tokens")
"""The token limits a price file may give a model (whole numbers >= 1): its context window bounds
the prompt of a call holding server-side context under a budget; its output limit the worst case
of a call that sets no max_tokens."""
_MILLION = 1_000_000

SIM_MODEL = "asynceval-sim"
SIM_PRICE: Mapping[str, float] = {"input_mtok": 1.0, "output_mtok": 2.0, "cache_read_mtok": 0.5}
"""The embedded simulated provider's documented price, so that cost is testable offline: $1 per
million prompt tokens, $2 per million completion tokens, $0.50 per million cached prompt tokens,
live; half of each in the batch and flex lanes (as OpenAI's list prices are)."""
SIM_MAX_OUTPUT_TOKENS = 256
"""The most completion tokens the simulated provider answers (fewer when a request's max_tokens
says so): its calls' worst case, for a budget."""
DEFAULT_OUTPUT_RESERVE = 32_768
"""The completion tokens a budget reserves for a call that sets no max_tokens (max_tokens,
max_completion_tokens or max_output_tokens) to a model whose output limit is not known (see
`Price.output_cap`)."""


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price in one lane, USD per million tokens (a `Decimal`, or genai-prices'
    `TieredPrices` for a model whose price depends on the prompt's size). `cache_read_mtok` None:
    cached prompt tokens cost what the others do. `source` says where it came from ("file",
    "sim" or "genai-prices:PROVIDER/MODEL")."""

    input_mtok: Decimal | TieredPrices
    output_mtok: Decimal | TieredPrices
    cache_read_mtok: Decimal | TieredPrices | None = None
    source: str = "file"
    context_window: int | None = None
    cache_write_mtok: Decimal | TieredPrices | None = None
    max_output_tokens: int | None = None

    def cost(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal:
        """What one call cost: `prompt_tokens` (all of them, `cached_tokens` read from the
        provider's prompt cache and `cache_write_tokens` written to it included) and
        `completion_tokens` at this price; unrounded. A price with no cache rates prices those
        tokens as the others."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        written = min(max(cache_write_tokens, 0), prompt_tokens - cached)
        read_rate = self.input_mtok if self.cache_read_mtok is None else self.cache_read_mtok
        write_rate = self.input_mtok if self.cache_write_mtok is None else self.cache_write_mtok
        if (
            type(self.input_mtok) is Decimal
            and type(self.output_mtok) is Decimal
            and type(read_rate) is Decimal
            and type(write_rate) is Decimal
        ):  # flat prices (most): the same sum as genai-prices', in a quarter of the time
            flat = self.input_mtok * (prompt_tokens - cached - written)
            flat += self.output_mtok * completion_tokens
            if cached:
                flat += read_rate * cached
            if written:
                flat += write_rate * written
            return flat / _MILLION
        from genai_prices.types import calc_unit_price

        total = calc_unit_price(
            self.input_mtok, prompt_tokens - cached - written, prompt_tokens, _MILLION
        ) + calc_unit_price(self.output_mtok, completion_tokens, prompt_tokens, _MILLION)
        if cached:
            total += calc_unit_price(read_rate, cached, prompt_tokens, _MILLION)
        if written:
            total += calc_unit_price(write_rate, written, prompt_tokens, _MILLION)
        return total

    @classmethod
    def of(
        cls, prices: Price | Mapping[str, Any], model: str = "the model", lane: Lane = "live"
    ) -> Price:
        """A price given in genai-prices' vocabulary (`{"input_mtok": 2.5, "output_mtok": 10}`,
        USD per million tokens, with optional `batch` / `flex` entries for those lanes), checked
        as a price file's entry is, for `lane`; a `Price` as it is, in every lane."""
        if isinstance(prices, Price):
            return prices
        found = _lanes(model, prices)
        return found.get(lane) or found["live"]

    def output_cap(self, prompt_bound: int) -> int:
        """The most completion tokens a call that sets no max_tokens may get: the model's
        output limit if known, else what its context window leaves after the prompt's bound,
        else `DEFAULT_OUTPUT_RESERVE`."""
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        if self.context_window is not None:
            return max(self.context_window - prompt_bound, 0) or DEFAULT_OUTPUT_RESERVE
        return DEFAULT_OUTPUT_RESERVE

    def worst_case(self, prompt_bound: int, output_cap: int) -> Decimal:
        """The most a call can cost with at most `prompt_bound` prompt tokens (all at the
        dearer of the input and cache-write rates) and `output_cap` completion tokens."""
        dearest = self.cost(prompt_bound, output_cap)
        if self.cache_write_mtok is not None:
            dearest = max(dearest, self.cost(prompt_bound, output_cap, 0, prompt_bound))
        return dearest


class PromptRatio:
    """The most prompt tokens per byte of request body the answers of one model (at one
    endpoint) have reported: 1 until an answer reports more (hidden tokens a provider adds, a
    tokenizer that counts more than a byte's worth). A budget bounds a request's prompt at its
    body's bytes times this. Raised from any thread, never lowered.

    Until an answer has said (`confirmed`), a budget lets one request of the model out at a
    time, the probe (`hold` / `let_go`, by the identity of the share it reserved), so that
    only one request's tokens beyond its bound can exceed the budget."""

    __slots__ = ("_holder", "_lock", "confirmed", "value")

    def __init__(self) -> None:
        self.value = 1.0
        self.confirmed = False
        self._holder: object | None = None
        self._lock = threading.Lock()

    def observe(self, prompt_tokens: int, prompt_bytes: int) -> None:
        """An answer reported `prompt_tokens` for a body of `prompt_bytes` bytes."""
        self.confirmed = True
        if prompt_bytes <= 0 or prompt_tokens <= prompt_bytes * self.value:
            return
        with self._lock:
            self.value = max(self.value, prompt_tokens / prompt_bytes)

    def hold(self, share: object) -> bool:
        """Whether the request that reserves `share` may go: once confirmed, any; before, the
        one request that holds the probe (True: it is now `share`'s)."""
        with self._lock:
            if self.confirmed:
                return True
            if self._holder is not None:
                return False
            self._holder = share
            return True

    def let_go(self, share: object) -> None:
        """The request that reserved `share` settled, or became a stream read by its caller
        (who may be the code waiting): the probe goes to the next request, if it held it."""
        with self._lock:
            if self._holder is share:
                self._holder = None


class Prices:
    """Where a runtime's calls find their price (see the module). `overrides` maps a model name
    to its prices in genai-prices' vocabulary (`{"input_mtok": 2.5, "output_mtok": 10,
    "cache_read_mtok": 1.25}`, USD per million tokens; `cache_write_mtok` prices the prompt
    tokens written to a provider's prompt cache; a tier as `{"base": 3, "tiers": [{"start":
    200000, "price": 6}]}`); a bad one is a `ConfigError` naming the model and the key. Lookups are
    kept per (model, base URL, lane), from any thread."""

    def __init__(self, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._overrides: dict[tuple[str, str], Price] = {}
        for name, prices in (overrides or {}).items():
            for lane, price in _lanes(str(name), prices).items():
                self._overrides[(str(name), lane)] = price
        self._found: dict[tuple[str, str | None, str], Price | None] = {}
        self._ratios: dict[tuple[str, str | None], PromptRatio] = {}
        self._lock = threading.Lock()

    def prompt_ratio(self, model: str, base_url: str | None = None) -> PromptRatio:
        """The tokens per byte learned from the answers of `model` at `base_url` (shared by
        every route of this runtime to that endpoint)."""
        key = (model, base_url)
        try:
            return self._ratios[key]
        except KeyError:
            pass
        with self._lock:
            return self._ratios.setdefault(key, PromptRatio())

    @classmethod
    def from_file(cls, path: str | Path) -> Prices:
        """Prices from a JSON or YAML file (`.yaml` / `.yml`) mapping model names to prices."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the price file {path}: {exc}") from None
        data = _parse(path, text)
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: a price file maps model names to prices, got {data!r}")
        try:
            return cls(data)
        except ConfigError as exc:  # a bad entry: said with the file it is in
            raise ConfigError(f"{path}: {exc}") from None

    def price(
        self, model: str, *, base_url: str | None = None, lane: Lane = "live"
    ) -> Price | None:
        """`model`'s price in `lane` for calls to `base_url`, or None when nobody prices it."""
        if lane not in _CONTEXTS:
            raise ConfigError(f"lane must be one of live, flex, batch, got {lane!r}")
        key = (model, base_url, lane)
        try:
            return self._found[key]
        except KeyError:
            pass
        found = self._overrides.get((model, lane)) or self._overrides.get((model, "live"))
        if found is None:
            found = _sim_price(lane) if model == SIM_MODEL else _bundled(model, base_url, lane)
        with self._lock:
            return self._found.setdefault(key, found)


def _lanes(model: str, prices: Any) -> dict[str, Price]:
    """A price file's entry per lane: its own prices for live (and any lane it does not name),
    and those under its `batch` / `flex` keys for that lane (`{"input_mtok": 2, "output_mtok": 8,
    "batch": {"input_mtok": 1, "output_mtok": 4}}`): a provider's discount is not guessed."""
    if not isinstance(prices, Mapping):
        return {"live": _checked(model, prices)}
    live = {k: v for k, v in prices.items() if k not in ("batch", "flex")}
    found = {"live": _checked(model, live)}
    limits = {key: live[key] for key in _LIMITS if key in live}  # the model's, in every lane
    for lane in ("batch", "flex"):
        if lane in prices:
            entry = prices[lane]
            entry = {**limits, **entry} if isinstance(entry, Mapping) else entry
            found[lane] = _checked(f"{model}/{lane}", entry)
    return found


def _checked(model: str, prices: Any) -> Price:
    """A price file's entry as a `Price`, through genai-prices' own validation of price values."""
    if not isinstance(prices, Mapping):
        raise ConfigError(f"price of {model!r}: expected an object of prices, got {prices!r}")
    unknown = sorted(set(prices) - set(_KEYS) - set(_LIMITS))
    if unknown:
        raise ConfigError(
            f"price of {model!r}: unknown key {unknown[0]!r} (the keys are "
            f"{', '.join(_KEYS + _LIMITS)})"
        )
    limits: dict[str, int] = {}
    for name in _LIMITS:
        value = prices.get(name)
        if value is None:
            continue
        if type(value) is not int or value < 1:
            raise ConfigError(
                f"price of {model!r}: {name} is a number of tokens >= 1, got {value!r}"
            )
        limits[name] = value
    prices = {key: value for key, value in prices.items() if key not in _LIMITS}
    for needed in ("input_mtok", "output_mtok"):
        if prices.get(needed) is None:
            raise ConfigError(f"price of {model!r}: {needed} is missing")
    import pydantic
    from genai_prices.types import TieredPrices

    adapter = pydantic.TypeAdapter(dict[str, Decimal | TieredPrices | None])
    try:
        values = adapter.validate_python(dict(prices))
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(
            f"price of {model!r}: {error['loc'][0]}: {error['msg']}, got {error['input']!r}"
        ) from None
    for name, value in values.items():
        rates = [value] if isinstance(value, Decimal) else []
        if isinstance(value, TieredPrices):
            rates = [value.base, *(tier.price for tier in value.tiers)]
        if any(not rate.is_finite() or rate < 0 for rate in rates):
            raise ConfigError(f"price of {model!r}: {name} must be >= 0, got {prices[name]!r}")
    return Price(
        values["input_mtok"],  # type: ignore[arg-type]
        values["output_mtok"],  # type: ignore[arg-type]
        values.get("cache_read_mtok"),
        context_window=limits.get("context_window"),
        cache_write_mtok=values.get("cache_write_mtok"),
        max_output_tokens=limits.get("max_output_tokens"),
    )


def _sim_price(lane: str = "live") -> Price:
    share = Decimal(1) if lane == "live" else Decimal("0.5")  # batch and flex: half, as OpenAI's
    return Price(
        Decimal(str(SIM_PRICE["input_mtok"])) * share,
        Decimal(str(SIM_PRICE["output_mtok"])) * share,
        Decimal(str(SIM_PRICE["cache_read_mtok"])) * share,
        source="sim",
        max_output_tokens=SIM_MAX_OUTPUT_TOKENS,
    )


def _bundled(model: str, base_url: str | None, lane: str) -> Price | None:
    """genai-prices' price of `model` (its provider from `base_url`, else from the name alone)."""
    from datetime import UTC, datetime

    from genai_prices.data_snapshot import get_snapshot

    snapshot = get_snapshot()
    found = None
    for url in (base_url, None) if base_url else (None,):
        try:
            found = snapshot.find_provider_model(model, None, None, url)
            break
        except (LookupError, ValueError):
            continue
    if found is None:
        return None
    provider, info = found
    prices = info.get_prices(datetime.now(UTC), _CONTEXTS[lane])
    keys = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
    rates = [getattr(prices, key, None) for key in keys]
    if rates[0] is None or rates[1] is None:
        return None  # priced by other units (images, requests): not by tokens
    return Price(
        rates[0],
        rates[1],
        rates[2],
        source=f"genai-prices:{provider.id}/{info.id}",
        context_window=info.context_window,
        cache_write_mtok=rates[3],
    )


def _parse(path: Path, text: str) -> Any:
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                f"{path}: a YAML price file needs PyYAML (pip install pyyaml), or write it as JSON"
            ) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not YAML: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
