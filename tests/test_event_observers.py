"""Observers see every event, or only the events they name (the others cost them nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynceval import events


def test_an_observer_naming_its_events_sees_only_those() -> None:
    seen: list[str] = []
    everything: list[str] = []

    def named(event: str, fields: Mapping[str, Any]) -> None:
        seen.append(event)

    def every(event: str, fields: Mapping[str, Any]) -> None:
        everything.append(event)

    events.add_observer(named, only=("wanted", "also_wanted"))
    events.add_observer(every)
    try:
        for name in ("wanted", "other", "also_wanted", "other", "wanted"):
            events.emit(name, n=1)
        events.remove_observer(named)
        events.emit("wanted", n=2)
    finally:
        events.remove_observer(every)
    events.emit("wanted", n=3)
    assert seen == ["wanted", "also_wanted", "wanted"]
    assert everything == ["wanted", "other", "also_wanted", "other", "wanted", "wanted"]


def test_an_observer_added_later_sees_an_event_already_written_before() -> None:
    seen: list[tuple[str, Any]] = []

    def observe(event: str, fields: Mapping[str, Any]) -> None:
        seen.append((event, fields.get("n")))

    events.emit("probe", n=1)  # its observers looked up and remembered: none
    events.add_observer(observe, only=["probe"])
    try:
        events.emit("probe", n=2)
        events.forward('{"event": "probe", "level": "info", "n": 3}')
    finally:
        events.remove_observer(observe)
    assert seen == [("probe", 2), ("probe", 3)]
