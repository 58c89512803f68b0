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


async def test_a_runtime_bound_in_two_tasks_at_once_unbinds_cleanly() -> None:
    """`async with rt:` in two concurrent tasks: each sees rt inside and the default after."""
    import anyio

    from asynceval import Runtime, Settings

    rt = Runtime(Settings(max_concurrent_llm_calls=7))
    default = Runtime.current()
    seen: list[int] = []

    async def use(delay: float) -> None:
        async with rt:
            await anyio.sleep(delay)
            seen.append(Runtime.current().limiter.limit)
        assert Runtime.current() is default

    async with anyio.create_task_group() as tg:
        tg.start_soon(use, 0.01)  # entered first, leaves first: not last-in-first-out
        tg.start_soon(use, 0.05)
    assert seen == [7, 7]
