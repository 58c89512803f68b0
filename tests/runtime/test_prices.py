"""Prices (DESIGN section 15, the first step of issue 28): a call's cost is its tokens times the
price the caller gave (a price file in genai-prices' vocabulary), the simulator's documented
price, or genai-prices' bundled data; a model nobody prices has no price, never $0."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from asynceval.errors import ConfigError
from asynceval.runtime import Prices
from asynceval.runtime.prices import SIM_MODEL, SIM_PRICE


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "prices.json",
            '{"my-model": {"input_mtok": 2.5, "output_mtok": 10, "cache_read_mtok": 1.25}}',
        ),
        (
            "prices.yaml",
            "my-model:\n  input_mtok: 2.5\n  output_mtok: 10\n  cache_read_mtok: 1.25\n",
        ),
    ],
)
def test_a_calls_cost_is_its_tokens_at_the_files_prices(
    tmp_path: Path, name: str, text: str
) -> None:
    price = Prices.from_file(write(tmp_path, name, text)).price("my-model")
    assert price is not None and price.source == "file"
    # 1,000 prompt tokens of which 400 cached, 300 completion tokens, USD per million
    expected = (Decimal(600) * Decimal("2.5") + 400 * Decimal("1.25") + 300 * 10) / 10**6
    assert price.cost(1000, 300, cached_tokens=400) == expected  # exact: not rounded
    assert price.cost(0, 0) == 0


def test_a_model_nobody_prices_has_no_price_not_a_zero_one() -> None:
    prices = Prices()
    assert (
        prices.price("meta-llama/Llama-3.1-8B-Instruct", base_url="http://127.0.0.1:8000/v1")
        is None
    )
    assert prices.price("no-such-model-anywhere") is None


def test_the_simulated_providers_price_is_the_documented_one() -> None:
    price = Prices().price(SIM_MODEL)
    assert price is not None and price.source == "sim"
    expected = (100 * SIM_PRICE["input_mtok"] + 20 * SIM_PRICE["output_mtok"]) / 10**6
    assert float(price.cost(100, 20)) == pytest.approx(expected, rel=1e-12)
    for lane in ("batch", "flex"):  # half of live, as OpenAI's list prices are
        halved = Prices().price(SIM_MODEL, lane=lane)
        assert halved is not None and halved.cost(100, 20) * 2 == price.cost(100, 20)


def test_bundled_prices_equal_genai_prices_own_calculation() -> None:
    prices = Prices()
    mini = prices.price("gpt-4o-mini", base_url="https://api.openai.com/v1")
    assert mini is not None and mini.source == "genai-prices:openai/gpt-4o-mini"
    usage = Usage(input_tokens=12_345, output_tokens=678, cache_read_tokens=2_000)
    assert (
        mini.cost(12_345, 678, 2_000)
        == calc_price(usage, "gpt-4o-mini", provider_id="openai").total_price
    )
    # A tiered price: past 200k prompt tokens the higher rate applies to every token.
    sonnet = prices.price("claude-sonnet-4-5")
    assert sonnet is not None
    for prompt in (150_000, 250_000):
        big = Usage(input_tokens=prompt, output_tokens=1_000)
        assert sonnet.cost(prompt, 1_000) == calc_price(big, "claude-sonnet-4-5").total_price


def test_a_lane_picks_its_price_variant() -> None:
    prices = Prices()
    live = prices.price("gpt-4o-mini", lane="live")
    batch = prices.price("gpt-4o-mini", lane="batch")
    assert live is not None and batch is not None
    assert batch.cost(1_000_000, 1_000_000) == live.cost(1_000_000, 1_000_000) / 2
    with pytest.raises(ConfigError, match="lane must be one of"):
        prices.price("gpt-4o-mini", lane="slow")  # type: ignore[arg-type]


def test_a_file_price_wins_over_the_bundled_one(tmp_path: Path) -> None:
    path = write(
        tmp_path, "p.json", json.dumps({"gpt-4o-mini": {"input_mtok": 1, "output_mtok": 1}})
    )
    price = Prices.from_file(path).price("gpt-4o-mini", base_url="https://api.openai.com/v1")
    assert price is not None and price.source == "file"
    assert price.cost(10**6, 10**6) == 2


def test_a_tier_in_a_price_file(tmp_path: Path) -> None:
    tiers = {
        "input_mtok": {"base": 3, "tiers": [{"start": 200_000, "price": 6}]},
        "output_mtok": 15,
    }
    price = Prices({"big": tiers}).price("big")
    assert price is not None
    assert price.cost(100_000, 0) == Decimal("0.3")
    assert price.cost(300_000, 0) == Decimal("1.8")  # 6 per million on all 300k


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"input_mtoks": 1, "output_mtok": 1}, "unknown key 'input_mtoks'"),
        ({"input_mtok": 1}, "output_mtok is missing"),
        ({"input_mtok": -1, "output_mtok": 1}, "input_mtok must be >= 0"),
        ({"input_mtok": "cheap", "output_mtok": 1}, "input_mtok"),
        ("2.5", "expected an object of prices"),
    ],
)
def test_a_bad_price_is_refused_naming_the_model_and_the_key(entry: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        Prices({"m": entry})  # type: ignore[dict-item]
    assert "'m'" in str(raised.value)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("p.json", "{not json", "not JSON"),
        ("p.json", "[1, 2]", "maps model names to prices"),
        ("p.yaml", "a: [b", "not YAML"),
    ],
)
def test_a_bad_price_file_is_one_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Prices.from_file(write(tmp_path, name, text))
    with pytest.raises(ConfigError, match="cannot read the price file"):
        Prices.from_file(tmp_path / "missing.json")


def test_a_flat_price_costs_what_genai_prices_own_arithmetic_says() -> None:
    """The direct Decimal sum for flat prices equals genai-prices' calc_unit_price, cache reads
    and writes included, on calls of every size."""
    import random
    from decimal import Decimal

    from genai_prices.types import calc_unit_price

    from asynceval.runtime import Price

    price = Price(Decimal("2.5"), Decimal("10"), Decimal("1.25"), cache_write_mtok=Decimal("3.125"))
    rng = random.Random(7)
    for _ in range(500):
        prompt, completion = rng.randint(0, 10**6), rng.randint(0, 10**5)
        cached = rng.randint(0, prompt)
        written = rng.randint(0, prompt - cached)
        parts = (
            (price.input_mtok, prompt - cached - written),
            (price.output_mtok, completion),
            (price.cache_read_mtok, cached),
            (price.cache_write_mtok, written),
        )
        expected = sum(calc_unit_price(rate, n, prompt, 1_000_000) for rate, n in parts)
        assert price.cost(prompt, completion, cached, written) == expected
