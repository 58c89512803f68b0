"""Rate-limit headers as providers send them (OpenAI, Anthropic), garbage included, and the
budget an endpoint keeps from them."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from asynceval.limits import ProviderRates, read_rate_headers
from asynceval.limits._rate_headers import MAX_RESET_S, Budget, _duration

from ..conftest import EventLog


@pytest.mark.parametrize(
    ("reset", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1m30.5s", 90.5), ("2h", 7200.0)],
)
def test_openai_headers_and_their_go_durations(reset: str, seconds: float) -> None:
    said = read_rate_headers(
        httpx.Headers(
            {
                "X-RateLimit-Limit-Requests": "120",
                "x-ratelimit-remaining-requests": "40",
                "x-ratelimit-reset-requests": reset,
                "x-ratelimit-limit-tokens": "150000",
                "x-ratelimit-remaining-tokens": "149000",
                "x-ratelimit-reset-tokens": "400ms",
            }
        )
    )
    assert said is not None and said.dialect == "openai"
    assert _duration(reset) == pytest.approx(seconds)
    # A reset further than a minute away is read as a minute: a per-minute budget is whole by then.
    expected = min(seconds, MAX_RESET_S)
    assert said.requests[:2] == (120, 40) and said.requests.reset == pytest.approx(expected)
    assert said.tokens[:2] == (150000, 149000) and said.tokens.reset == pytest.approx(0.4)
    assert not said.empty and said.refill is None


def test_anthropic_headers_and_their_rfc3339_resets() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=30)
    said = read_rate_headers(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "12",
            "anthropic-ratelimit-requests-reset": soon.isoformat().replace("+00:00", "Z"),
            "anthropic-ratelimit-tokens-limit": "80000",
            "anthropic-ratelimit-tokens-remaining": "79000",
            "anthropic-ratelimit-output-tokens-remaining": "0",
            "anthropic-ratelimit-output-tokens-reset": soon.isoformat(),
        }
    )
    assert said is not None and said.dialect == "anthropic"
    assert said.requests.limit == 50 and said.requests.remaining == 12
    assert said.requests.reset == pytest.approx(30, abs=1)
    assert said.tokens.limit == 80000 and said.tokens.reset is None
    # The output-token budget is spent: a 429 with these headers is a rate refusal.
    assert said.empty and said.refill == pytest.approx(30, abs=1)


def test_a_spent_requests_budget_without_a_reset_is_empty_with_no_refill_time() -> None:
    said = read_rate_headers({"x-ratelimit-remaining-requests": "0"})
    assert said is not None and said.empty and said.refill == 0.0


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content-type": "application/json", "retry-after": "1"},
        {"x-ratelimit-remaining-requests": "lots", "x-ratelimit-limit-requests": "-3"},
        {"x-ratelimit-remaining-requests": "1.5", "x-ratelimit-reset-requests": "soon"},
        {"x-ratelimit-remaining-requests": "nan", "x-ratelimit-reset-requests": "1x2s"},
        {"anthropic-ratelimit-requests-remaining": "", "anthropic-ratelimit-requests-reset": "x"},
        {"anthropic-ratelimit-tokens-remaining": "inf"},
    ],
)
def test_garbage_is_as_if_absent_and_never_raises(headers: dict[str, str]) -> None:
    said = read_rate_headers(headers)
    assert said is None or (
        said.requests == Budget(None, None, None)
        and said.tokens == Budget(None, None, None)
        and not said.empty
    )


@pytest.mark.parametrize("reset", ["", "s", "1x", "-1s", "inf", "1s2", "2026-01-01T00:00:00"])
def test_unreadable_resets_are_none(reset: str) -> None:
    said = read_rate_headers(
        {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": reset}
    )
    assert said is not None and said.requests == Budget(None, 3, None)


def test_the_budget_counts_sends_after_the_answered_one(event_log: EventLog) -> None:
    """An answer to the 1st send saying 39 left, when 19 more went since: 20 may still go;
    once they have, none until the reset. The limit is said once, not per answer."""
    rates = ProviderRates("e", learn_requests=True, learn_tokens=True)
    said = read_rate_headers(
        {
            "x-ratelimit-limit-requests": "120",
            "x-ratelimit-remaining-requests": "39",
            "x-ratelimit-reset-requests": "1s",
        }
    )
    assert said is not None
    now = time.monotonic()
    assert rates.heard(said, sent=1, sends=20, now=now) == 0.0
    assert rates.active and rates.requests_per_minute == 120
    assert rates.wait(sends=20, now=now) == 0.0
    assert rates.wait(sends=39, now=now) == 0.0  # the 20th of those left may go
    assert rates.wait(sends=40, now=now) == pytest.approx(1.0)
    assert rates.wait(sends=40, now=now + 1.0) == 0.0  # the reset passed: nothing known
    rates.heard(said, sent=2, sends=40, now=now)  # the same limit again
    assert len(event_log.named("rate_learned")) == 1
    older = read_rate_headers({"x-ratelimit-remaining-requests": "0"})
    assert older is not None
    assert rates.heard(older, sent=1, sends=40, now=now) == 0.0  # older than the freshest


def test_a_dimension_set_in_the_settings_is_not_learned(event_log: EventLog) -> None:
    rates = ProviderRates("e", learn_requests=False, learn_tokens=True)
    said = read_rate_headers(
        {"x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": "100"}
    )
    assert said is not None
    rates.heard(said, sent=1, sends=1, now=time.monotonic())
    assert rates.requests_per_minute is None and rates.window is None
    assert not event_log.named("rate_learned")
