"""ToolExecutor: waves, ordering, the parallel bound and error isolation.

Timing-independent: fake tools record ("start", tag) and ("end", tag) around scheduler checkpoints
or anyio Events, and the assertions read that order, never the clock. Waits that could only hang
if the executor were wrong sit under a generous `fail_after`, so a bug fails instead of hanging.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asynceval import Benchmark, Settings, Task
from asynceval.llm import ToolCall
from asynceval.runtime import set_process_default
from asynceval.tools import Tool, ToolExecutor

from ..conftest import EventLog

GUARD_S = 10  # only reached if the executor is wrong (a rendezvous that never completes)


class Recorder:
    """Fake tools that log when each call starts and ends and count how many run at once."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.running = 0
        self.peak = 0

    def tool(self, name: str, *, checkpoints: int = 5, **declarations: Any) -> Tool:
        async def fn(tag: str = name) -> str:
            self.log.append(("start", tag))
            self.running += 1
            self.peak = max(self.peak, self.running)
            for _ in range(checkpoints):
                await anyio.lowlevel.checkpoint()
            self.running -= 1
            self.log.append(("end", tag))
            return f"{tag} done"

        return Tool(name, fn, **declarations)

    def at(self, kind: str, tag: str) -> int:
        return self.log.index((kind, tag))

    def overlap(self, a: str, b: str) -> bool:
        return self.at("start", a) < self.at("end", b) and self.at("start", b) < self.at("end", a)


class Rendezvous:
    """Each call logs its start, then waits until `n` calls have started: completes only if
    all `n` run at the same time."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.started = 0
        self.all_started = anyio.Event()
        self.log: list[tuple[str, str]] = []

    async def __call__(self, tag: str) -> str:
        self.log.append(("start", tag))
        self.started += 1
        if self.started == self.n:
            self.all_started.set()
        await self.all_started.wait()
        self.log.append(("end", tag))
        return tag


def call(name: str, tag: str | None = None, **arguments: Any) -> dict[str, Any]:
    if tag is not None:
        arguments["tag"] = tag
    return {"id": f"id-{tag or name}", "name": name, "arguments": arguments}


def waves(event_log: EventLog) -> list[list[str]]:
    return [event["tools"] for event in event_log.named("tool_wave")]


async def test_read_only_calls_all_start_before_any_ends(event_log: EventLog) -> None:
    meet = Rendezvous(3)
    executor = ToolExecutor([Tool("read", meet, read_only=True)], max_parallel=5)
    with anyio.fail_after(GUARD_S):
        results = await executor.run([call("read", tag) for tag in ("a", "b", "c")])
    assert [kind for kind, _ in meet.log] == ["start"] * 3 + ["end"] * 3
    assert [r["content"] for r in results] == ["a", "b", "c"]
    assert waves(event_log) == [["read", "read", "read"]]


async def test_a_write_and_a_read_of_different_resources_run_together() -> None:
    meet = Rendezvous(2)
    executor = ToolExecutor(
        [
            Tool("write_a", meet, writes=["a"]),
            Tool("read_b", meet, read_only=True, reads=["b"]),
        ],
        max_parallel=5,
    )
    with anyio.fail_after(GUARD_S):
        await executor.run([call("write_a", "w"), call("read_b", "r")])
    assert meet.log == [("start", "w"), ("start", "r"), ("end", "w"), ("end", "r")]


async def test_a_read_waits_for_an_earlier_write_of_its_resource(event_log: EventLog) -> None:
    rec = Recorder()
    executor = ToolExecutor(
        [rec.tool("write_a", writes=["a"]), rec.tool("read_a", read_only=True, reads=["a"])],
        max_parallel=5,
    )
    await executor.run([call("write_a", "w"), call("read_a", "r")])
    assert rec.log == [("start", "w"), ("end", "w"), ("start", "r"), ("end", "r")]
    first, second = event_log.named("tool_wave")
    assert first["tools"] == ["write_a"] and first["concurrent"] is False
    assert first["reason"] == "conflict"
    assert first["next_tool"] == "read_a" and first["resources"] == ["a"]
    assert second["tools"] == ["read_a"] and second["reason"] == "end"


async def test_two_writes_of_one_resource_run_in_order() -> None:
    rec = Recorder()
    executor = ToolExecutor([rec.tool("write_a", writes=["a"])], max_parallel=5)
    await executor.run([call("write_a", "w1"), call("write_a", "w2")])
    assert rec.log == [("start", "w1"), ("end", "w1"), ("start", "w2"), ("end", "w2")]


async def test_a_tool_with_no_declarations_is_a_barrier(event_log: EventLog) -> None:
    rec = Recorder()
    executor = ToolExecutor(
        [rec.tool("read", read_only=True), rec.tool("bash"), rec.tool("write_b", writes=["b"])],
        max_parallel=5,
    )
    await executor.run(
        [
            call("read", "r1"),
            call("write_b", "w"),
            call("bash", "x"),
            call("read", "r2"),
            call("read", "r3"),
        ]
    )
    assert rec.overlap("r1", "w")
    assert rec.at("start", "x") > max(rec.at("end", "r1"), rec.at("end", "w"))
    assert rec.at("start", "r2") > rec.at("end", "x")
    assert rec.overlap("r2", "r3")
    assert waves(event_log) == [["read", "write_b"], ["bash"], ["read", "read"]]
    reasons = [(e["reason"], e.get("resources")) for e in event_log.named("tool_wave")]
    assert reasons == [("conflict", []), ("exclusive", None), ("end", None)]


async def test_a_wave_closes_at_the_first_conflict_even_for_later_independent_calls(
    event_log: EventLog,
) -> None:
    rec = Recorder()
    executor = ToolExecutor(
        [
            rec.tool("write_a", writes=["a"]),
            rec.tool("read_a", read_only=True, reads=["a"]),
            rec.tool("read_b", read_only=True, reads=["b"]),
        ],
        max_parallel=5,
    )
    await executor.run([call("write_a", "w"), call("read_a", "ra"), call("read_b", "rb")])
    assert waves(event_log) == [["write_a"], ["read_a", "read_b"]]
    assert rec.at("start", "ra") > rec.at("end", "w")
    assert rec.overlap("ra", "rb")


async def test_results_come_back_in_call_order_when_later_calls_finish_first() -> None:
    finished: list[str] = []
    fast_done = anyio.Event()

    async def slow() -> str:
        await fast_done.wait()  # cannot end before `fast` has ended
        finished.append("slow")
        return "slow result"

    async def fast() -> dict[str, Any]:
        finished.append("fast")
        fast_done.set()
        return {"answer": 42, "items": ["é"]}

    executor = ToolExecutor(
        [Tool("slow", slow, read_only=True), Tool("fast", fast, read_only=True)], max_parallel=5
    )
    with anyio.fail_after(GUARD_S):
        results = await executor.run([call("slow"), call("fast")])
    assert finished == ["fast", "slow"]
    assert results == [
        {"tool_call_id": "id-slow", "name": "slow", "content": "slow result", "is_error": False},
        {
            "tool_call_id": "id-fast",
            "name": "fast",
            "content": json.dumps({"answer": 42, "items": ["é"]}, ensure_ascii=False),
            "is_error": False,
        },
    ]


async def test_max_parallel_bounds_the_calls_running_at_once(event_log: EventLog) -> None:
    rec = Recorder()
    executor = ToolExecutor([rec.tool("read", read_only=True)], max_parallel=2)
    tags = [f"r{i}" for i in range(5)]
    results = await executor.run([call("read", tag) for tag in tags])
    assert rec.peak == 2
    assert [tag for kind, tag in rec.log if kind == "start"] == tags  # submission order
    assert [r["content"] for r in results] == [f"{tag} done" for tag in tags]
    (wave,) = event_log.named("tool_wave")
    assert wave["concurrent"] is True


async def test_max_parallel_one_runs_a_wave_one_call_at_a_time(event_log: EventLog) -> None:
    rec = Recorder()
    executor = ToolExecutor([rec.tool("read", read_only=True)], max_parallel=1)
    await executor.run([call("read", "r1"), call("read", "r2"), call("read", "r3")])
    assert rec.peak == 1
    assert rec.log == [(kind, tag) for tag in ("r1", "r2", "r3") for kind in ("start", "end")]
    (wave,) = event_log.named("tool_wave")
    assert wave["concurrent"] is False


async def test_a_failing_tool_gives_an_error_result_and_the_others_finish() -> None:
    rec = Recorder()

    async def boom(tag: str) -> str:
        rec.log.append(("start", tag))
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("disk full")

    def empty_error() -> str:
        raise KeyError

    executor = ToolExecutor(
        [
            rec.tool("read", read_only=True, checkpoints=10),
            Tool("boom", boom, read_only=True),
            Tool("empty", empty_error, read_only=True),
        ],
        max_parallel=5,
    )
    results = await executor.run(
        [call("read", "r1"), call("boom", "b"), call("empty"), call("read", "r2")]
    )
    assert rec.overlap("r1", "r2") and ("end", "r1") in rec.log and ("end", "r2") in rec.log
    assert [r["is_error"] for r in results] == [False, True, True, False]
    assert results[1] == {
        "tool_call_id": "id-b",
        "name": "boom",
        "content": "Tool execution error: disk full",
        "is_error": True,
    }
    assert results[2]["content"] == "Tool execution error: KeyError"
    assert results[3]["content"] == "r2 done"


async def test_an_unknown_tool_gives_an_error_result_and_joins_no_wave(
    event_log: EventLog,
) -> None:
    rec = Recorder()
    executor = ToolExecutor([rec.tool("read", read_only=True)], max_parallel=5)
    results = await executor.run([call("read", "r1"), call("nope"), call("read", "r2")])
    assert results[1] == {
        "tool_call_id": "id-nope",
        "name": "nope",
        "content": "Tool execution error: unknown tool 'nope'",
        "is_error": True,
    }
    assert [r["content"] for r in (results[0], results[2])] == ["r1 done", "r2 done"]
    assert waves(event_log) == [["read", "read"]]


def echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@pytest.mark.parametrize(
    "tool_call",
    [
        {"id": "c1", "name": "echo", "arguments": {"x": 2, "y": "z"}},
        {"id": "c1", "name": "echo", "arguments": '{"x": 2, "y": "z"}'},
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"x": 2, "y": "z"}'},
        },
        ToolCall(id="c1", name="echo", arguments={"x": 2, "y": "z"}),
        ToolCall.from_json("c1", "echo", '{"x": 2, "y": "z"}'),
    ],
    ids=["dict", "json-string", "openai-shape", "toolcall", "toolcall-from-json"],
)
async def test_arguments_as_a_dict_a_json_string_or_a_tool_call(
    tool_call: ToolCall | Mapping[str, Any],
) -> None:
    executor = ToolExecutor([Tool("echo", echo, read_only=True)], max_parallel=5)
    (result,) = await executor.run([tool_call])
    assert result == {
        "tool_call_id": "c1",
        "name": "echo",
        "content": '{"x": 2, "y": "z"}',
        "is_error": False,
    }


@pytest.mark.parametrize(
    ("tool_call", "message"),
    [
        ({"name": "echo", "arguments": "{not json"}, "arguments are not valid JSON"),
        ({"name": "echo", "arguments": "[1, 2]"}, "arguments must be a JSON object, got list"),
        ({"name": "echo", "arguments": 7}, "arguments must be a JSON object, got int"),
        (ToolCall.from_json("call_0", "echo", "{not json"), "arguments are not valid JSON"),
        ({"arguments": {}}, "no tool name"),
    ],
)
async def test_a_bad_arguments_payload_gives_an_error_result(
    tool_call: ToolCall | Mapping[str, Any], message: str
) -> None:
    ran: list[Any] = []
    executor = ToolExecutor([Tool("echo", ran.append, read_only=True)], max_parallel=5)
    (result,) = await executor.run([tool_call])
    assert result["is_error"] is True and result["tool_call_id"] == "call_0"
    assert result["content"].startswith(f"Tool execution error: {message}")
    assert ran == []


async def test_missing_or_empty_arguments_mean_none_and_a_missing_id_is_generated() -> None:
    executor = ToolExecutor([Tool("ping", lambda: "pong", read_only=True)], max_parallel=5)
    results = await executor.run(
        [{"name": "ping"}, {"name": "ping", "arguments": ""}, {"name": "ping", "arguments": None}]
    )
    assert [(r["tool_call_id"], r["content"]) for r in results] == [
        ("call_0", "pong"),
        ("call_1", "pong"),
        ("call_2", "pong"),
    ]


async def test_return_values_become_strings() -> None:
    values: dict[str, Any] = {"int": 3, "none": None, "list": [1, "a"], "tuple": (1, 2)}
    executor = ToolExecutor(
        [Tool(name, lambda v=value: v, read_only=True) for name, value in values.items()],
        max_parallel=5,
    )
    results = await executor.run([{"name": name} for name in values])
    assert [r["content"] for r in results] == ["3", "None", '[1, "a"]', "[1, 2]"]


async def test_an_argument_named_like_call_maybe_async_parameters_passes_through() -> None:
    executor = ToolExecutor([Tool("f", lambda func: func * 2, read_only=True)], max_parallel=5)
    (result,) = await executor.run([{"name": "f", "arguments": {"func": 21}}])
    assert result["content"] == "42"


async def test_a_call_that_is_not_a_mapping_is_a_type_error() -> None:
    executor = ToolExecutor([], max_parallel=5)
    with pytest.raises(TypeError, match="must be a ToolCall or a mapping"):
        await executor.run(["read"])  # type: ignore[list-item]


async def test_no_calls_give_no_results_and_no_events(event_log: EventLog) -> None:
    assert await ToolExecutor([], max_parallel=5).run([]) == []
    assert event_log.named("tool_wave") == []


async def test_sync_tools_run_in_worker_threads_and_together_outside_a_run() -> None:
    threads: list[threading.Thread] = []
    both_started = threading.Barrier(2, timeout=5)  # only passes if the two run at once

    def lookup(key: str) -> str:
        threads.append(threading.current_thread())
        both_started.wait()
        return key.upper()

    executor = ToolExecutor([Tool("lookup", lookup, read_only=True)], max_parallel=5)
    results = await executor.run([call("lookup", key="a"), call("lookup", key="b")])
    assert [r["content"] for r in results] == ["A", "B"]
    assert threading.main_thread() not in threads and len(threads) == 2


async def test_sync_tools_run_in_worker_threads_inside_a_benchmark_run() -> None:
    threads: list[threading.Thread] = []

    def lookup(key: str) -> str:
        threads.append(threading.current_thread())
        return key.upper()

    executor = ToolExecutor([Tool("lookup", lookup, read_only=True)], max_parallel=5)

    class UsesTools(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def agent(query: str) -> list[dict[str, Any]]:
                return await executor.run([call("lookup", key=query), call("lookup", key="z")])

            return [agent], {}

        async def setup_evaluators(
            self, environment: Any, task: Task, agents: Any, user: Any
        ) -> Any:
            def check(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
                return {"passed": [r["content"] for r in answer] == ["Q", "Z"]}

            return [check]

    (report,) = await UsesTools().run([Task(query="q")])
    assert report["status"] == "success" and report["eval"] == [{"passed": True}]
    assert len(threads) == 2
    assert all(thread is not threading.main_thread() for thread in threads)


async def test_wave_events_are_written_at_debug(event_log: EventLog) -> None:
    executor = ToolExecutor(
        [Tool("read", lambda: "x", read_only=True), Tool("bash", lambda: "y")], max_parallel=5
    )
    await executor.run([{"name": "read"}, {"name": "read"}, {"name": "bash"}])
    events = event_log.named("tool_wave")
    assert [(e["level"], e["tools"], e["concurrent"], e["reason"]) for e in events] == [
        ("DEBUG", ["read", "read"], True, "conflict"),
        ("DEBUG", ["bash"], False, "exclusive"),
    ]
    assert events[0]["next_tool"] == "bash"


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate tool name 'read'"):
        ToolExecutor([Tool("read", echo), Tool("read", echo)], max_parallel=5)


def test_tools_must_be_tool_instances() -> None:
    with pytest.raises(TypeError, match="expected a Tool"):
        ToolExecutor([echo], max_parallel=5)  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_max_parallel_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_parallel must be an integer >= 1"):
        ToolExecutor([], max_parallel=bad)


def test_max_parallel_comes_from_settings_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ToolExecutor([]).max_parallel == 5
    assert ToolExecutor([], settings=Settings(max_parallel_tools=3)).max_parallel == 3
    assert (
        ToolExecutor([], max_parallel=2, settings=Settings(max_parallel_tools=3)).max_parallel == 2
    )
    monkeypatch.setenv("MAX_PARALLEL_TOOLS", "4")
    set_process_default()  # the environment is read once per process default Runtime
    assert ToolExecutor([]).max_parallel == 4


def test_the_executor_exposes_its_tools_and_their_schemas() -> None:
    read = Tool("read", echo, read_only=True, description="Read")
    executor = ToolExecutor([read], max_parallel=5)
    assert dict(executor.tools) == {"read": read}
    assert executor.openai_schemas() == [read.openai_schema()]
