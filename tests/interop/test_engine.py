"""Framework calls inside a run: the report's usage counts them, events carry the task ids."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import openai

from asynceval import Benchmark, Settings, SyncAgent, Task
from asynceval.interop import openai_client

from ..conftest import EventLog


class SdkBench(Benchmark):
    """Each task's agent makes one call with the OpenAI SDK, async or sync."""

    def __init__(self, sync: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sync = sync

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        if self.sync:
            client: openai.OpenAI = openai_client(sync=True)

            class Solver:
                def run(self, query: str) -> str:
                    answer = client.chat.completions.create(
                        model="asynceval-sim", messages=[{"role": "user", "content": query}]
                    )
                    return answer.choices[0].message.content or ""

            agent = SyncAgent(Solver(), name="sync-solver")
            return [agent], {"sync-solver": agent}
        aclient: openai.AsyncOpenAI = openai_client()

        async def solver(query: str) -> str:
            answer = await aclient.chat.completions.create(
                model="asynceval-sim", messages=[{"role": "user", "content": query}]
            )
            return answer.choices[0].message.content or ""

        return [solver], {}


async def check(sync: bool, tmp_path: Path, event_log: EventLog) -> None:
    bench = SdkBench(sync, settings=Settings(max_concurrent_llm_calls=5))
    tasks = [Task(query=f"What is {i} + 3?", id=f"t{i}") for i in range(20)]
    reports = await bench.run(tasks, results_path=tmp_path / "results.jsonl")
    assert {r["status"] for r in reports} == {"success"}
    for report in reports:
        usage = report["usage"]
        assert usage["llm_calls"] == 1 and usage["prompt_tokens"] > 0, usage
        assert usage["completion_tokens"] > 0
    acquired = event_log.named("acquired")
    assert len(acquired) == 20 and {e["task_id"] for e in acquired} == {f"t{i}" for i in range(20)}
    assert event_log.max_in_flight() <= 5
    if sync:
        assert {e["agent"] for e in acquired} == {"sync-solver"}


async def test_async_sdk_calls_in_a_run_are_counted(tmp_path: Path, event_log: EventLog) -> None:
    await check(False, tmp_path, event_log)


async def test_sync_sdk_calls_in_engine_threads_are_counted(
    tmp_path: Path, event_log: EventLog
) -> None:
    await check(True, tmp_path, event_log)


class Bypass(Benchmark):
    """An agent whose calls go around the funnel (here: no call at all, as a bypass looks)."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: str) -> str:
            return "42"

        return [agent], {}


async def test_a_run_that_recorded_no_llm_call_says_why_once(
    tmp_path: Path, event_log: EventLog
) -> None:
    results = tmp_path / "results.jsonl"
    await Bypass().run([Task(query="q", id="a"), Task(query="q2", id="b")], results_path=results)
    (warning,) = event_log.named("no_llm_calls")
    assert warning["level"] == "WARNING" and warning["successes"] == 2
    assert "asynceval.http_client()" in warning["advice"]
    report = await anyio.run_process(
        [sys.executable, "-m", "asynceval", "report", str(results)], check=True
    )
    assert "warning: no LLM call went through asynceval's funnel" in report.stdout.decode()
    event_log.stream.seek(0)
    event_log.stream.truncate(0)
    await SdkBench(False).run([Task(query="What is 1 + 1?", id="c")])
    assert not event_log.named("no_llm_calls")


class Hoarder(Benchmark):
    """Each agent reads one chunk of a streamed answer, keeps the stream (so no garbage
    collector can free it) and returns without closing it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kept: list[Any] = []

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client: openai.AsyncOpenAI = openai_client(agent="hoarder")

        async def agent(query: str) -> str:
            stream = await client.chat.completions.create(
                model="asynceval-sim", messages=[{"role": "user", "content": query}], stream=True
            )
            self.kept.append(stream)
            async for _ in stream:
                break
            return "42"

        return [agent], {}


async def test_a_stream_a_repetition_left_open_is_released_when_it_ends(
    tmp_path: Path, event_log: EventLog
) -> None:
    """At limit 1, three repetitions that each leave a stream open (and referenced) all finish:
    each repetition's end releases its stream's slot, with a `stream_abandoned` warning."""
    bench = Hoarder(settings=Settings(max_concurrent_llm_calls=1))
    tasks = [Task(query=f"What is {i} + 3?", id=f"t{i}") for i in range(3)]
    with anyio.fail_after(20):
        reports = await bench.run(tasks, results_path=tmp_path / "results.jsonl")
    assert [r["status"] for r in reports] == ["success"] * 3
    abandoned = event_log.named("stream_abandoned")
    assert len(abandoned) == 3 and {e["agent"] for e in abandoned} == {"hoarder"}
    assert {e["level"] for e in abandoned} == {"WARNING"}
    assert len(event_log.named("released")) == 3 and event_log.max_in_flight() == 1
    assert len(bench.kept) == 3
