"""Settings are read once per process (or per Runtime built for them), never per model."""

from __future__ import annotations

from typing import Any

import pytest

from asynceval import config

from ._benches import OneCall, tasks


async def test_a_hundred_repetitions_building_models_read_settings_at_most_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each repetition builds an OpenAIChatModel; the process default Runtime reads the
    environment once, and nothing else does."""
    built = 0
    original = config.Settings.__init__

    def counting(self: Any, **values: Any) -> None:
        nonlocal built
        built += 1
        original(self, **values)

    monkeypatch.setattr(config.Settings, "__init__", counting)
    reports = await OneCall().run(tasks("t", 100))
    assert [r["status"] for r in reports] == ["success"] * 100
    assert built <= 1
