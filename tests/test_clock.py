"""The traces' and configs' metadata timestamp is `datetime.now(UTC).isoformat()`'s text, and an
event's is the same instant with a Z, both from a per-second cache of the clock's text."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from asynceval import _clock


def test_it_is_the_isoformat_of_now() -> None:
    before = datetime.now(UTC)
    stamp = _clock.utc_isoformat()
    after = datetime.now(UTC)
    assert before <= datetime.fromisoformat(stamp) <= after
    assert stamp == datetime.fromisoformat(stamp).isoformat()


@pytest.mark.parametrize(
    "ns", [1_700_000_000_000_000_000, 1_700_000_000_123_456_789, 1_700_000_000_999_999_999]
)
def test_whole_seconds_and_microseconds_are_written_as_isoformat_does(
    monkeypatch: pytest.MonkeyPatch, ns: int
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    expected = datetime.fromtimestamp(ns // 10**9, UTC).replace(microsecond=ns // 1000 % 10**6)
    assert _clock.utc_isoformat() == expected.isoformat()


@pytest.mark.parametrize("ns", [1_700_000_000_000_000_000, 1_700_000_001_000_042_999])
def test_an_events_timestamp_is_the_same_instant_with_a_z(
    monkeypatch: pytest.MonkeyPatch, ns: int
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    instant = datetime.fromtimestamp(ns // 10**9, UTC).replace(microsecond=ns // 1000 % 10**6)
    assert _clock.utc_timestamp() == instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_event_lines_and_component_metadata_take_their_time_from_the_clock() -> None:
    from asynceval import _eventlog
    from asynceval.engine import registry

    assert _eventlog.timestamp is _clock.utc_timestamp
    assert registry.utc_isoformat is _clock.utc_isoformat
