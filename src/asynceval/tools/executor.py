"""ToolExecutor: run one turn's tool calls, concurrently where their declared resources allow.

Calls are taken in order and grouped into waves: a call joins the current wave unless it conflicts
with a call already in it (one writes a resource the other reads or writes; an exclusive tool
conflicts with everything), in which case the wave is run to its end first and the call opens the
next one. So a read waits for an earlier write of its resource, and calls on unrelated resources,
or read-only ones, run together, at most `max_parallel` at once. Each wave is logged at DEBUG as a
`tool_wave` event. Results come back in call order; a call that fails becomes an error result and
the others still run.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anyio

from .. import events
from ..config import Settings
from ..engine.threads import is_async, run_in_thread
from ..llm.types import ToolCall
from ..runtime import Runtime, from_thread
from .tool import Tool

"""The DEBUG event written for each wave: tools, concurrent, reason (exclusive, conflict or end),
and for a conflict the next call's tool and the resources they share."""

ERROR_PREFIX = "Tool execution error: "


@dataclass(frozen=True)
class _Call:
    """One call ready to run: its place in the turn, id, tool and keyword arguments."""

    index: int
    id: str
    tool: Tool
    arguments: dict[str, Any]

    @property
    def name(self) -> str:
        return self.tool.name


def _result(call_id: str, name: str, content: str, is_error: bool) -> dict[str, Any]:
    return {"tool_call_id": call_id, "name": name, "content": content, "is_error": is_error}


def _error(call_id: str, name: str, message: str) -> dict[str, Any]:
    return _result(call_id, name, ERROR_PREFIX + message, True)


def _content(value: Any) -> str:
    """A tool's return value as message content: strings as they are, dicts and lists as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return json.dumps(dict(value), default=str, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return json.dumps(list(value), default=str, ensure_ascii=False)
    return str(value)


def _arguments(raw: Any) -> dict[str, Any]:
    """Keyword arguments from a mapping or a JSON object string; None or "" mean none."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"arguments must be a JSON object, got {type(raw).__name__}")
    return dict(raw)


def _identify(index: int, call: ToolCall | Mapping[str, Any]) -> tuple[str, str, Any]:
    """(id, name, raw arguments) of an asynceval ToolCall, a `{"id", "name", "arguments"}` dict or
    an OpenAI `{"id", "function": {"name", "arguments"}}` dict; a missing id becomes `call_<i>`."""
    if isinstance(call, ToolCall):
        raw: Any = call.arguments
        if not raw and call.raw_arguments.strip():
            raw = call.raw_arguments  # ToolCall turned unparseable text into {}: report it
        return call.id or f"call_{index}", call.name, raw
    if isinstance(call, Mapping):
        function = call.get("function")
        source = function if isinstance(function, Mapping) else call
        call_id = call.get("id")
        name = source.get("name")
        return (
            str(call_id) if call_id else f"call_{index}",
            name if isinstance(name, str) else "",
            source.get("arguments"),
        )
    raise TypeError(f"tool call {index} must be a ToolCall or a mapping, got {call!r}")


class ToolExecutor:
    """Runs tool calls against a fixed set of tools (see the module docstring for the schedule).

    `max_parallel` bounds the calls running at once within one `run` (default: MAX_PARALLEL_TOOLS
    of `settings`, else of the current Runtime's). Duplicate tool names are a ValueError. Sync code
    (a sync agent in an engine worker thread) calls `run_sync`.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        max_parallel: int | None = None,
        settings: Settings | None = None,
    ) -> None:
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise TypeError(f"expected a Tool, got {tool!r}")
            if tool.name in by_name:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            by_name[tool.name] = tool
        if max_parallel is None:
            max_parallel = (settings or Runtime.current().settings).max_parallel_tools
        if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
            raise ValueError(f"max_parallel must be an integer >= 1, got {max_parallel!r}")
        self._tools: Mapping[str, Tool] = MappingProxyType(by_name)
        self.max_parallel = max_parallel

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The tools by name (read-only)."""
        return self._tools

    def openai_schemas(self) -> list[dict[str, Any]]:
        """Every tool's OpenAI function-tool entry, for a model request's `tools`."""
        return [tool.openai_schema() for tool in self._tools.values()]

    async def run(self, calls: Iterable[ToolCall | Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Run the calls; one `{"tool_call_id", "name", "content", "is_error"}` per call, in call
        order. An unknown tool, bad arguments or a tool that raises give an error result whose
        content starts with "Tool execution error: ". A call that is neither a ToolCall nor a
        mapping is a TypeError (the caller's mistake, not the model's)."""
        results: list[dict[str, Any]] = []
        limiter = anyio.Semaphore(self.max_parallel)
        wave: list[_Call] = []
        for index, raw_call in enumerate(calls):
            prepared = self._prepare(index, raw_call)
            results.append(prepared if isinstance(prepared, dict) else {})
            if isinstance(prepared, dict):
                continue
            if any(c.tool.conflicts_with(prepared.tool) for c in wave):
                await self._run_wave(wave, results, limiter, _why(wave, prepared))
                wave = []
            wave.append(prepared)
        if wave:
            await self._run_wave(wave, results, limiter, _why(wave, None))
        return results

    def run_sync(self, calls: Iterable[ToolCall | Mapping[str, Any]]) -> list[dict[str, Any]]:
        """`run` for sync code in a worker thread (a sync agent's tool step): the calls run on the
        event loop, sync tools on the caller's thread token, so a run whose every thread is a sync
        agent still gets its tools run. Refused on the event loop thread."""
        calls = list(calls)
        return from_thread(self.run, calls)

    def _prepare(self, index: int, call: ToolCall | Mapping[str, Any]) -> _Call | dict[str, Any]:
        """The call ready to run, or its error result if it names no known tool or its arguments
        are not a JSON object."""
        call_id, name, raw = _identify(index, call)
        tool = self._tools.get(name)
        if tool is None:
            return _error(call_id, name, f"unknown tool {name!r}" if name else "no tool name")
        try:
            arguments = _arguments(raw)
        except ValueError as exc:
            return _error(call_id, name, str(exc))
        return _Call(index, call_id, tool, arguments)

    async def _run_wave(
        self,
        wave: list[_Call],
        results: list[dict[str, Any]],
        limiter: anyio.Semaphore,
        why: dict[str, Any],
    ) -> None:
        """Run one wave to its end, at most `max_parallel` at once, started in call order."""
        concurrent = len(wave) > 1 and self.max_parallel > 1
        events.tool_wave(tools=[c.name for c in wave], concurrent=concurrent, **why)
        if len(wave) == 1:
            results[wave[0].index] = await _invoke(wave[0])
            return

        async def one(call: _Call) -> None:
            try:
                results[call.index] = await _invoke(call)
            finally:
                limiter.release()

        async with anyio.create_task_group() as tg:
            for call in wave:
                await limiter.acquire()  # here, not in the task: slots go in submission order
                tg.start_soon(one, call)


def _why(wave: list[_Call], following: _Call | None) -> dict[str, Any]:
    """The `tool_wave` fields saying why the wave ends before `following` (None: no more calls).
    `resources` is empty when `following` is exclusive."""
    if len(wave) == 1 and wave[0].tool.exclusive:
        return {"reason": "exclusive"}  # declares no resources: it runs alone
    if following is None:
        return {"reason": "end"}
    shared = frozenset[str]().union(*(c.tool.shared_resources(following.tool) for c in wave))
    return {"reason": "conflict", "next_tool": following.name, "resources": sorted(shared)}


async def _invoke(call: _Call) -> dict[str, Any]:
    """Call the tool. Sync tools always run in worker threads (`run_in_thread`: the run's, on
    the caller's token when a sync agent runs them, else anyio's pool), so a wave of blocking
    tools still runs at once."""
    try:
        # A partial, so arguments of any name pass through.
        fn = functools.partial(call.tool.fn, **call.arguments)
        value = await fn() if is_async(call.tool.fn) else await run_in_thread(fn)
        if inspect.isawaitable(value):
            value = await value
        content = _content(value)
    except Exception as exc:
        return _error(call.id, call.name, str(exc) or type(exc).__name__)
    return _result(call.id, call.name, content, False)
