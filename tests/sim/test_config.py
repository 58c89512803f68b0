"""SimConfig validation, the latency distributions and the public surface."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

import asynceval.sim
from asynceval.sim import SimConfig
from asynceval.sim._faults import Corruption, Draws


def test_public_names_are_exported_once_in_a_sorted_all() -> None:
    names = asynceval.sim.__all__
    assert names == sorted(names)
    assert {"SimConfig", "SimProvider", "serve", "sim_app"} <= set(names)


def test_defaults_match_the_contract() -> None:
    config = SimConfig()
    assert (config.seed, config.latency, config.latency_jitter) == (0, 0.05, 0.0)
    assert config.latency_distribution == "uniform"
    assert (config.max_concurrency, config.rpm, config.retry_after) == (None, None, 1.0)
    assert (config.fail_first, config.fail_first_status, dict(config.fault_rates)) == (0, 429, {})
    assert (config.hang_rate, config.malformed_rate, config.truncated_rate) == (0.0, 0.0, 0.0)
    assert config.tokens_per_char == 0.25
    assert (config.rate_window, config.attempt_memory) == (60.0, 65_536)
    assert config.stream_chunk_delay == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        {"latency": -1.0},
        {"latency_distribution": "normal"},
        {"max_concurrency": 0},
        {"rpm": 0},
        {"fault_rates": {503: 1.5}},
        {"fault_rates": {503: 0.6, 500: 0.6}},
        {"fault_rates": {200: 0.1}},
        {"hang_rate": 2.0},
        {"malformed_rate": 0.7, "truncated_rate": 0.7},
        {"tokens_per_char": 0.0},
        {"rate_window": 0.0},
        {"rate_window": float("inf")},
        {"attempt_memory": 0},
        {"stream_chunk_delay": -0.1},
        {"stream_chunk_delay": float("nan")},
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="SimConfig: invalid"):
        SimConfig(**bad)


def test_config_is_frozen_and_keeps_its_own_copy_of_fault_rates() -> None:
    rates = {503: 0.5}
    config = SimConfig(fault_rates=rates)
    rates[503] = 1.0
    assert config.fault_rates == {503: 0.5}
    with pytest.raises(AttributeError):
        config.seed = 1  # type: ignore[misc]


def delays(**config: Any) -> list[float]:
    sim = SimConfig(**config)
    return [Draws.for_attempt(0, b"%d" % i, 0).delay(sim) for i in range(2000)]


def test_fixed_latency_is_exact() -> None:
    assert set(delays(latency=0.2, latency_jitter=0.1, latency_distribution="fixed")) == {0.2}


def test_uniform_latency_stays_within_the_jitter_and_never_below_zero() -> None:
    values = delays(latency=0.1, latency_jitter=0.05)
    assert 0.05 <= min(values) < 0.06
    assert 0.14 < max(values) <= 0.15
    assert min(delays(latency=0.01, latency_jitter=0.05)) == 0.0


def test_exponential_latency_has_the_configured_mean() -> None:
    values = delays(latency=0.1, latency_distribution="exponential")
    assert 0.09 < statistics.mean(values) < 0.11


def test_draws_depend_on_seed_request_and_attempt() -> None:
    base = Draws.for_attempt(0, b"r", 0)
    assert base == Draws.for_attempt(0, b"r", 0)
    assert base != Draws.for_attempt(1, b"r", 0)
    assert base != Draws.for_attempt(0, b"s", 0)
    assert base != Draws.for_attempt(0, b"r", 1)


def test_corruption_splits_between_malformed_and_truncated() -> None:
    config = SimConfig(malformed_rate=0.3, truncated_rate=0.3)
    kinds = [Draws.for_attempt(0, b"%d" % i, 0).corruption(config) for i in range(1000)]
    assert 200 < kinds.count(Corruption.MALFORMED) < 400
    assert 200 < kinds.count(Corruption.TRUNCATED) < 400
