"""Scoped: the class-based context-variable scope the engine enters per attempt."""

from __future__ import annotations

from contextvars import ContextVar

import anyio
import pytest

from asynceval import events
from asynceval._scoped import Scoped

VAR: ContextVar[str | None] = ContextVar("test_scoped", default=None)


def test_a_scope_restores_the_outer_value_even_when_its_block_raises() -> None:
    with Scoped(VAR, "outer") as outer:
        assert outer == "outer" and VAR.get() == "outer"

        def inner() -> None:
            with Scoped(VAR, "inner"):
                assert VAR.get() == "inner"
                raise KeyError("boom")

        with pytest.raises(KeyError):
            inner()
        assert VAR.get() == "outer"
    assert VAR.get() is None


async def test_bound_fields_stay_in_their_own_task() -> None:
    seen: dict[str, object] = {}

    async def one(name: str) -> None:
        with events.bind_context(task_id=name):
            await anyio.sleep(0.01)  # the other task binds meanwhile
            seen[name] = events.context_value("task_id")
        seen[name + "-after"] = events.context_value("task_id")

    with events.bind_context(run="r1"):
        async with anyio.create_task_group() as group:
            group.start_soon(one, "a")
            group.start_soon(one, "b")
        assert events.context_value("run") == "r1"
    assert seen == {"a": "a", "b": "b", "a-after": None, "b-after": None}


def test_bound_fields_are_those_around_the_block_when_it_is_entered() -> None:
    block = events.bind_context(task_id="t1")  # made outside any binding
    with events.bind_context(run_id="r1"), block:
        assert (events.context_value("run_id"), events.context_value("task_id")) == ("r1", "t1")
    assert events.context_value("run_id") is None
