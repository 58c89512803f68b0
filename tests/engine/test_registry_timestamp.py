"""The traces' and configs' metadata timestamp: `datetime.now(UTC).isoformat()`'s text, made
from a per-second cache (two per repetition)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from asynceval.engine import registry


def test_it_is_the_isoformat_of_now() -> None:
    before = datetime.now(UTC)
    stamp = registry._now_iso()
    after = datetime.now(UTC)
    assert before <= datetime.fromisoformat(stamp) <= after
    assert stamp == datetime.fromisoformat(stamp).isoformat()


@pytest.mark.parametrize(
    "ns", [1_700_000_000_000_000_000, 1_700_000_000_123_456_789, 1_700_000_000_999_999_999]
)
def test_whole_seconds_and_microseconds_are_written_as_isoformat_does(
    monkeypatch: pytest.MonkeyPatch, ns: int
) -> None:
    monkeypatch.setattr(registry.time, "time_ns", lambda: ns)
    expected = datetime.fromtimestamp(ns // 10**9, UTC).replace(microsecond=ns // 1000 % 10**6)
    assert registry._now_iso() == expected.isoformat()
