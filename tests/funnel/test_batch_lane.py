"""The batch lane (DESIGN section 16) against the simulated provider's batch APIs, in process
(its ASGI app as the models' transport): a run's calls go into a few provider batches instead of
going live, with the live run's answers at the batch price; an agent's turns are batch round
trips shared by every repetition; lines that errored or expired are sent again; a refused line
fails its call as the live endpoint's refusal would; a call cancelled leaves, a batch whose calls
have all gone is cancelled at the provider (or kept), and each batch is journaled before it is
created. Calls take no slot: a batch's creation takes one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from asynceval import (
    AnthropicChatModel,
    Benchmark,
    LLMCallFailed,
    OpenAIChatModel,
    Runtime,
    Settings,
    Task,
    events,
)
from asynceval.analysis.logcheck import check_events
from asynceval.errors import BudgetExhausted
from asynceval.funnel import BatchLane, CallJournal, journal_scope, track_usage
from asynceval.limits import CostBudget, budget_scope
from asynceval.llm import ChatModel
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

BASE = "http://sim.test/v1"
MODEL = "asynceval-sim"


def lane_settings(lane: str = "batch", **values: Any) -> Settings:
    """Short lingers and polls, fast retries: a test's batches take a few tens of ms."""
    values.setdefault("llm_batch_linger", 0.1)
    values.setdefault("llm_batch_poll", 0.02)
    return Settings(llm_lane=lane, retry_initial_delay=0.01, retry_max_delay=0.05, **values)  # type: ignore[arg-type]


def openai_model(sim: SimProvider, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        MODEL, base_url=BASE, api_key="sk-batch", transport=httpx.ASGITransport(app=sim), **kwargs
    )


class Turns(Benchmark):
    """Each repetition's agent makes `turns` calls, each on the answer before it; the last
    answer of each task is kept in `answers`."""

    def __init__(self, model: ChatModel, turns: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model, self.turns = model, turns
        self.answers: dict[str, str] = {}

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            text = str(query)
            for turn in range(self.turns):
                text = (await self.model.generate(f"{text} then turn {turn}")).text
            self.answers[str(task.id)] = text
            return text

        return [agent], {}


def tasks(n: int) -> list[Task]:
    return [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(n)]


async def run(
    bench: Turns, settings: Settings, n: int, **kwargs: Any
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    async with Runtime(settings):
        reports = list(await bench.run(tasks(n), **kwargs))
    return bench.answers, reports


def batches(sim: SimProvider, provider: str = "openai") -> dict[str, Any]:
    """The simulated provider's own count of what its batch API was given and answered."""
    counts: dict[str, Any] = sim.stats().get("batches", {}).get(provider, {})
    return counts


async def test_a_batch_run_answers_as_a_live_run_in_fewer_batches_than_calls(
    event_log: EventLog,
) -> None:
    """30 one-call repetitions: the live run's answers, from a few batches holding each call
    once, nothing sent live, each call counted in its report at half the live price."""
    sim = SimProvider(SimConfig(batch_delay=0.05))
    live, live_reports = await run(Turns(openai_model(sim)), lane_settings("live"), 30)
    assert sim.stats()["requests"] == 30
    sim.reset_stats()
    answers, reports = await run(Turns(openai_model(sim)), lane_settings(), 30)
    assert answers == live and len(answers) == 30
    counts = batches(sim)
    assert sim.stats()["requests"] == 0  # not one call went live
    assert counts["lines"] == counts["succeeded"] == 30  # every call once
    assert 1 <= counts["created"] < 30
    assert [r["usage"]["llm_calls"] for r in reports] == [1] * 30
    live_cost = sum(r["usage"]["cost_usd"] for r in live_reports)
    assert sum(r["usage"]["cost_usd"] for r in reports) == pytest.approx(live_cost / 2)
    submitted = event_log.named("batch_submitted")
    assert len(submitted) == counts["created"]
    assert sum(e["requests"] for e in submitted) == 30


async def test_an_agents_turns_are_batch_round_trips_shared_by_its_repetitions() -> None:
    """12 repetitions of 3 turns: each turn waits for a batch, and the repetitions' turns go
    together (far fewer batches than calls), each line once; the live run's answers."""
    sim = SimProvider(SimConfig(batch_delay=0.05))
    live, _ = await run(Turns(openai_model(sim), turns=3), lane_settings("live"), 12)
    sim.reset_stats()
    settings = lane_settings(llm_batch_linger=0.4)  # the quiet rule sends them, not the linger
    answers, reports = await run(Turns(openai_model(sim), turns=3), settings, 12)
    assert answers == live
    counts = batches(sim)
    assert counts["lines"] == counts["succeeded"] == 36
    assert 3 <= counts["created"] <= 6  # one round trip per turn, shared
    assert [r["usage"]["llm_calls"] for r in reports] == [3] * 12


async def test_errored_and_expired_lines_go_into_later_batches_and_are_answered(
    event_log: EventLog,
) -> None:
    sim = SimProvider(SimConfig(batch_error_rate=0.25, batch_expire_rate=0.25))
    live, _ = await run(Turns(openai_model(sim)), lane_settings("live"), 20)
    sim.reset_stats()
    settings = lane_settings(retry_max_attempts=10)
    answers, reports = await run(Turns(openai_model(sim)), settings, 20)
    assert answers == live
    counts = batches(sim)
    assert counts["errored"] > 0 and counts["expired"] > 0
    assert counts["succeeded"] == 20
    assert counts["lines"] == 20 + counts["errored"] + counts["expired"]
    retries = event_log.named("retry")
    assert len(retries) == counts["lines"] - 20
    assert sum(r["usage"]["retries"] for r in reports) == len(retries)
    assert sum(r["usage"]["llm_calls"] for r in reports) == 20


async def test_a_failed_batch_is_sent_again() -> None:
    sim = SimProvider(SimConfig(batch_fail_first=1))
    async with Runtime(lane_settings()):
        model = openai_model(sim)
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(model.generate, f"What is {i} + 2?")
    counts = batches(sim)
    assert counts["failed"] == 1 and counts["created"] >= 2
    assert counts["succeeded"] == 4


async def test_a_refused_line_fails_its_call_as_the_live_endpoint_would() -> None:
    """A request the live endpoint refuses (400: a parameter the simulator cannot honour) is
    refused in its batch too: `LLMCallFailed` with that status after one attempt; the other
    calls of the batch are answered."""
    sim = SimProvider()
    async with Runtime(lane_settings()):
        model = openai_model(sim)
        with pytest.raises(LLMCallFailed) as live:
            await openai_model(sim, lane="live").generate("hi", logprobs=True)
        answered: list[str] = []

        async def fine() -> None:
            answered.append((await model.generate("What is 1 + 1?")).text)

        async with anyio.create_task_group() as tg:
            tg.start_soon(fine)
            with pytest.raises(LLMCallFailed) as failed:
                await model.generate("hi", logprobs=True)
    assert failed.value.status_code == live.value.status_code == 400
    assert failed.value.attempts == 1 and not failed.value.retryable
    assert failed.value.message == live.value.message
    assert answered == ["2"]
    assert batches(sim)["created"] == 1


async def test_an_anthropic_model_goes_in_message_batches() -> None:
    sim = SimProvider(SimConfig(batch_delay=0.02))

    def model(**kwargs: Any) -> AnthropicChatModel:
        return AnthropicChatModel(
            "claude-sim", base_url=BASE, transport=httpx.ASGITransport(app=sim), **kwargs
        )

    live, _ = await run(Turns(model(lane="live"), turns=2), lane_settings("live"), 6)
    sim.reset_stats()
    answers, _ = await run(Turns(model(), turns=2), lane_settings(), 6)
    assert answers == live
    counts = batches(sim, "anthropic")
    assert counts["lines"] == counts["succeeded"] == 12
    assert counts["created"] <= 4 and sim.stats()["requests"] == 0


async def test_the_openai_sdk_on_the_funnel_goes_in_batches() -> None:
    """`asynceval.interop.openai_client()` in the batch lane: the SDK gets each line's answer
    as a chat completion (and a refused line as its own `BadRequestError`)."""
    openai = pytest.importorskip("openai")
    from asynceval.interop import openai_client

    async with Runtime(lane_settings()) as runtime:
        client = openai_client()
        texts: dict[int, str] = {}

        async def ask(i: int) -> None:
            completion = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"What is {i} + 1?"}]
            )
            texts[i] = completion.choices[0].message.content

        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(ask, i)
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], logprobs=True
            )
        models = await client.models.list()  # not a batchable request: live
        counts = batches(runtime.sim)
        live_requests = runtime.sim.stats()["requests"]
    assert texts == {i: str(i + 1) for i in range(10)}
    assert models.data
    assert counts["lines"] == 11 and counts["created"] == 2
    assert live_requests == 0  # GET /v1/models is not a completion route's request


async def _cancelled_while_waiting(
    sim: SimProvider, event_log: EventLog, keep: bool, tmp_path: Path
) -> tuple[str, dict[str, Any]]:
    """Five calls wait on a batch the provider takes 30 s over; the run is cancelled once the
    batch exists. (the batch's id, the provider's batch object at the end)."""
    submitted_once = anyio.Event()

    def observe(event: str, fields: Mapping[str, Any]) -> None:
        if event == "batch_submitted":
            submitted_once.set()

    async with Runtime(lane_settings()) as runtime:
        lane = BatchLane.of(runtime)
        lane.keep_batches = keep
        model = openai_model(sim)
        events.add_observer(observe)
        async with CallJournal(tmp_path / "journal.sqlite", "one") as journal:
            with journal_scope(journal), anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for i in range(5):
                        tg.start_soon(model.generate, f"What is {i} + 3?")
                    await submitted_once.wait()
                    tg.cancel_scope.cancel()
            # The run's end: its batchers finish (cancelling the batches no call waits for).
            await lane.aclose()
        events.remove_observer(observe)
        (submitted,) = event_log.named("batch_submitted")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=sim)) as client:
            got = await client.get(f"{BASE}/batches/{submitted['batch_id']}")
    return submitted["batch_id"], got.json()


async def test_a_cancelled_run_cancels_its_open_batches(
    event_log: EventLog, tmp_path: Path
) -> None:
    sim = SimProvider(SimConfig(batch_delay=30))
    batch_id, batch = await _cancelled_while_waiting(sim, event_log, False, tmp_path)
    assert batch["status"] in ("cancelling", "cancelled")
    records = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    assert [r["record"] for r in records] == ["intent", "created", "ended"]
    assert records[2]["batch_id"] == batch_id
    (completed,) = event_log.named("batch_completed")
    # Its lines were cancelled, not expired (before: `expired: 5`).
    assert completed["status"] == "cancelled" and completed["cancelled"] == 5
    assert completed["expired"] == completed["errored"] == completed["succeeded"] == 0
    assert completed["cost_usd"] is None


async def test_keep_batches_leaves_a_cancelled_runs_batches_open(
    event_log: EventLog, tmp_path: Path
) -> None:
    sim = SimProvider(SimConfig(batch_delay=30))
    batch_id, batch = await _cancelled_while_waiting(sim, event_log, True, tmp_path)
    assert batch["status"] in ("validating", "in_progress")  # open
    records = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    assert [r["record"] for r in records] == ["intent", "created"]  # for a resume to collect
    assert records[1]["batch_id"] == batch_id
    assert not event_log.named("batch_completed")


async def test_a_call_cancelled_before_its_batch_goes_is_dropped() -> None:
    sim = SimProvider()
    async with Runtime(lane_settings(llm_batch_linger=0.6)):
        model = openai_model(sim)
        with anyio.move_on_after(0.05):  # before the quiet period (0.3 s) and the linger
            await model.generate("never sent")
        await model.generate("What is 4 + 4?")
    counts = batches(sim)
    assert counts["created"] == 1 and counts["lines"] == 1


async def test_batches_are_journaled_before_they_are_created(tmp_path: Path) -> None:
    """A run with a results file: `batches.jsonl` beside its `journal.sqlite` holds each
    batch's intent (its call ids) before the id the provider gave it, then its end; OpenAI's
    batch carries its key in its metadata."""
    sim = SimProvider()
    settings = lane_settings(llm_batch_size=4)
    await run(Turns(openai_model(sim)), settings, 10, results_path=tmp_path / "results.jsonl")
    records = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    intents = {r["batch_key"]: r for r in records if r["record"] == "intent"}
    created = [r for r in records if r["record"] == "created"]
    ended = {r["batch_id"] for r in records if r["record"] == "ended"}
    assert len(intents) == len(created) == batches(sim)["created"] == 3  # 4 + 4 + 2
    for record in created:
        assert records.index(intents[record["batch_key"]]) < records.index(record)
        assert record["batch_id"] in ended
    assert sorted(len(r["custom_ids"]) for r in intents.values()) == [2, 4, 4]
    assert all(r["provider"] == "openai" and r["endpoint"] == BASE for r in intents.values())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=sim)) as client:
        for record in created:  # the provider's batch names its key: a resume can find it
            batch = (await client.get(f"{BASE}/batches/{record['batch_id']}")).json()
            assert batch["metadata"] == {"asynceval_batch_key": record["batch_key"]}


async def test_events_say_what_each_batch_held_cost_and_did(event_log: EventLog) -> None:
    """`batch_submitted` names its calls, `batch_progress` each change a look saw,
    `batch_completed` its counts and cost; `logs check` counts the batch lines as calls that held
    no slot (a batch's creation held one) and adds the batches' cost to the run's spend."""
    sim = SimProvider(SimConfig(batch_delay=0.1))
    _, reports = await run(Turns(openai_model(sim)), lane_settings(max_concurrent_llm_calls=2), 8)
    submitted = event_log.named("batch_submitted")
    completed = event_log.named("batch_completed")
    assert {e["batch_id"] for e in submitted} == {e["batch_id"] for e in completed}
    assert sum(len(e["call_ids"]) for e in submitted) == 8
    assert all(e["provider"] == "openai" and e["endpoint"] == BASE for e in submitted)
    progress = event_log.named("batch_progress")
    assert progress and progress[-1]["status"] == "completed"
    assert sum(e["succeeded"] for e in completed) == 8
    cost = sum(e["cost_usd"] for e in completed)
    assert cost == pytest.approx(sum(r["usage"]["cost_usd"] for r in reports))
    acquired = event_log.named("acquired")
    assert {e["agent"] for e in acquired} == {"batch"}  # only the creations took a slot
    assert len(acquired) == len(submitted)
    check = check_events(event_log.all(), limit=2)
    assert check.batch_calls == 8 and check.batches == len(submitted)
    assert check.answered_without_slot == 8 and check.limit_held and check.ok
    assert check.cost_usd == pytest.approx(cost)


async def test_a_budget_reserves_each_line_and_settles_it_to_its_batch_price() -> None:
    sim = SimProvider()
    budget = CostBudget(1.0)
    async with Runtime(lane_settings()):
        model = openai_model(sim)
        with budget_scope(budget), track_usage() as usage:
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(model.generate, f"What is {i} + 5?")
        assert budget.reserved == 0
        assert budget.spent == usage.cost and usage.llm_calls == 6
        with budget_scope(CostBudget(1e-9)), pytest.raises(BudgetExhausted):
            await model.generate("too dear")  # its worst case does not fit: never queued
    assert batches(sim)["lines"] == 6


async def test_a_live_call_in_flight_holds_the_batch_to_its_linger() -> None:
    """While another call of the runtime is in flight (a slow live call), the batcher cannot
    tell that every caller waits: the queued line goes at LLM_BATCH_LINGER, not after the quiet
    period."""
    sim = SimProvider(SimConfig(latency=1.2))
    async with Runtime(lane_settings(llm_batch_linger=0.5)):
        model, slow = openai_model(sim), openai_model(sim, lane="live")
        start = anyio.current_time()
        alone = await model.generate("What is 1 + 2?")
        alone_s = anyio.current_time() - start
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow.generate, "slow")
            await anyio.sleep(0.05)
            start = anyio.current_time()
            await model.generate("What is 2 + 2?")
            held_s = anyio.current_time() - start
    assert alone.text == "3"
    assert alone_s < 0.45  # the quiet period (0.25 s): every caller was waiting on the batch
    assert 0.45 <= held_s < 1.1  # the linger
