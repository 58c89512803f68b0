"""The judge panel (seed 004) through the real call path: over loopback HTTP against
`asynceval sim serve`, in process against the simulated provider, and against scripted provider
answers at the HTTP edge (missing and malformed batch entries, a provider refusing structured
output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval import OpenAIChatModel, Settings, Task
from asynceval.evaluation import Dimension, JudgePanel, JudicialOpinion, PanelResult
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

from ..conftest import EventLog
from ._provider import AGENTS, DIMENSIONS, FAST, ScriptedProvider, completion, good_answer, opinion

ROOT = Path(__file__).parents[2]


def assert_complete(result: PanelResult) -> None:
    """Exactly agents x dimensions, in order, every one scored."""
    keys = [(o.agent, o.criterion_id) for o in result.opinions]
    assert keys == [(a, d) for a in AGENTS for d in DIMENSIONS]
    assert all(o.score is not None for o in result.opinions), result.errors
    assert result.errors == []


async def test_over_loopback_at_limit_5_the_provider_sees_at_most_5(
    sim_server: Callable[..., str], event_log: EventLog
) -> None:
    base_url = sim_server("--latency", "0.02")
    stats_url = base_url.removesuffix("/v1") + "/stats"
    model = OpenAIChatModel(
        "sim", base_url=base_url, settings=Settings(), controller=ConcurrencyController(5)
    )
    async with model, httpx.AsyncClient() as client:
        result = await JudgePanel(model, AGENTS, DIMENSIONS).evaluate("Paris.", task="Capital?")
        stats = (await client.get(stats_url)).json()
        assert_complete(result)
        assert result.calls == 30
        assert stats["requests"] == 30 and stats["statuses"] == {"200": 30}
        assert stats["max_in_flight"] == 5
        assert event_log.max_in_flight() == 5

        await client.post(stats_url + "/reset")
        batched = await JudgePanel(model, AGENTS, DIMENSIONS, batching=True).evaluate("Paris.")
        stats = (await client.get(stats_url)).json()
    assert_complete(batched)
    assert batched.calls == 3 and stats["requests"] == 3
    acquired = event_log.named("acquired")[30:]
    assert sorted(e["agent"] for e in acquired) == sorted(AGENTS)
    assert {e["dimension"] for e in acquired} == {"batch"}


async def test_batching_follows_the_setting_and_sim_answers_are_schema_valid() -> None:
    settings = Settings(batching_enabled=True)
    async with OpenAIChatModel(
        settings=settings, sim_config=SimConfig(latency=0), controller=ConcurrencyController(5)
    ) as model:
        panel = JudgePanel(model, AGENTS, DIMENSIONS)
        result = await panel.evaluate("Paris.")
    assert panel.batching and result.calls == 3
    assert_complete(result)
    assert model.sim is not None and model.sim.stats()["requests"] == 3


async def test_missing_and_malformed_batch_entries_are_retried_individually(
    event_log: EventLog,
) -> None:
    lenient, expert = AGENTS[1], AGENTS[2]
    corrupt = opinion("dim7", score="very good")

    def answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
        if dimension != "batch" or agent == AGENTS[0]:
            return good_answer(body, agent, dimension)
        entries = [opinion(d) for d in DIMENSIONS]
        if agent == lenient:
            entries = [e for e in entries if e["criterion_id"] not in ("dim2", "dim5")]
        else:
            entries[7] = corrupt
        return completion(json.dumps({"opinions": entries}))

    provider = ScriptedProvider(answer)
    async with provider.model() as model:
        result = await JudgePanel(model, AGENTS, DIMENSIONS, batching=True).evaluate("Paris.")
    assert_complete(result)
    retried = {key for key, count in provider.requests.items() if key[1] != "batch"}
    assert retried == {(lenient, "dim2"), (lenient, "dim5"), (expert, "dim7")}
    assert all(count == 1 for count in provider.requests.values())
    assert result.calls == 3 + 3
    (warning,) = event_log.named("batch_entry_malformed")
    assert warning["level"] == "WARNING" and warning["agent"] == expert
    assert warning["dimension"] == "dim7" and json.loads(warning["raw"]) == corrupt
    assert "score" in warning["error"]
    (missing,) = event_log.named("batch_entries_missing")
    assert missing["agent"] == lenient and missing["dimensions"] == ["dim2", "dim5"]


async def test_an_unparseable_batched_answer_retries_every_dimension(
    event_log: EventLog,
) -> None:
    def answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
        if dimension == "batch" and agent == AGENTS[0]:
            return completion('{"opinions": [{"criterion_id": "dim0", "sco')
        return good_answer(body, agent, dimension)

    provider = ScriptedProvider(answer)
    async with provider.model() as model:
        result = await JudgePanel(model, AGENTS, DIMENSIONS, batching=True).evaluate("Paris.")
    assert_complete(result)
    assert result.calls == 3 + 10
    assert {k for k in provider.requests if k[1] != "batch"} == {(AGENTS[0], d) for d in DIMENSIONS}
    (warning,) = event_log.named("batch_entry_malformed")
    assert warning["raw"].startswith('{"opinions"') and warning["dimension"] is None


async def test_a_provider_that_always_fails_gives_30_failed_opinions(
    event_log: EventLog,
) -> None:
    settings = Settings(**FAST)
    config = SimConfig(fault_rates={503: 1.0}, retry_after=0, latency=0)
    async with OpenAIChatModel(
        settings=settings, sim_config=config, controller=ConcurrencyController(5)
    ) as model:
        result = await JudgePanel(model, AGENTS, DIMENSIONS).evaluate("Paris.")
        batched = await JudgePanel(model, AGENTS, DIMENSIONS, batching=True).evaluate("Paris.")
    for outcome in (result, batched):
        assert len(outcome.opinions) == 30
        assert {o.score for o in outcome.opinions} == {None}
        assert {o.argument for o in outcome.opinions} == {"Evaluation failed after 3 retries"}
        assert [(e["agent"], e["criterion_id"]) for e in outcome.errors] == [
            (a, d) for a in AGENTS for d in DIMENSIONS
        ]
        assert {e["status_code"] for e in outcome.errors} == {503}
    assert result.calls == 30
    assert batched.calls == 3 + 30  # a failed batch call leaves every dimension to try alone
    assert len(event_log.named("judge_dimension_failed")) == 60
    assert len(event_log.named("llm_call_failed")) == 63


async def test_a_provider_refusing_response_format_gets_unstructured_calls(
    event_log: EventLog,
) -> None:
    def answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
        if body.get("response_format") is not None:
            message = "response_format is not supported by this model"
            return httpx.Response(400, json={"error": {"message": message}})
        return good_answer(body, agent, dimension)

    provider = ScriptedProvider(answer)
    async with provider.model() as model:
        panel = JudgePanel(model, AGENTS, DIMENSIONS, batching=True)
        result = await panel.evaluate("Paris.")
        assert_complete(result)
        assert not panel.structured_output
        assert 1 <= provider.structured <= 3 and provider.unstructured == 30
        assert {o.argument for o in result.opinions} == {"fine"}
        assert len(event_log.named("structured_output_fallback")) == 1

        again = await panel.evaluate("Lyon.")  # the fallback is remembered
    assert_complete(again)
    assert again.calls == 30 and provider.unstructured == 60 and provider.structured <= 3


async def test_structured_output_off_never_sends_a_response_format() -> None:
    provider = ScriptedProvider()
    async with provider.model(batching_enabled=True) as model:
        panel = JudgePanel(model, AGENTS, DIMENSIONS, structured_output=False)
        result = await panel.evaluate("Paris.")
    assert_complete(result)
    assert provider.structured == 0 and provider.unstructured == result.calls == 30


async def test_an_unusable_individual_answer_fails_after_one_attempt() -> None:
    def answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
        if (agent, dimension) == (AGENTS[1], "dim3"):
            return completion('{"criterion_id": "dim4", "score": 3, "argument": "wrong one"}')
        return good_answer(body, agent, dimension)

    provider = ScriptedProvider(answer)
    async with provider.model(retry_max_attempts=4) as model:
        result = await JudgePanel(model, AGENTS, DIMENSIONS).evaluate("Paris.")
    failed = [o for o in result.opinions if o.score is None]
    assert failed == [
        JudicialOpinion(
            agent=AGENTS[1],
            criterion_id="dim3",
            score=None,
            argument="Evaluation failed after 4 retries",
        )
    ]
    (error,) = result.errors
    assert error["status_code"] is None and "dim4" in error["error"]
    assert provider.requests[(AGENTS[1], "dim3")] == 1 and result.calls == 30


async def test_the_prompt_carries_persona_criterion_scale_task_and_answer() -> None:
    bodies: list[dict[str, Any]] = []

    def answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
        bodies.append(body)
        return good_answer(body, agent, dimension)

    provider = ScriptedProvider(answer)
    judges = {AGENTS[0]: "You are unforgiving."}
    dimension = Dimension("dim0", "Are the facts right?")
    task = Task(query="What is the capital of France?")
    async with provider.model() as model:
        panel = JudgePanel(model, judges, [dimension], score_range=(0, 10))
        await panel.evaluate("Paris.", task=task, context="Geography quiz")
    (body,) = bodies
    system, user = (m["content"] for m in body["messages"])
    assert system.startswith("You are unforgiving.")
    assert '"dim0": Are the facts right?' in system and "from 0 (worst) to 10 (best)" in system
    assert user == (
        "Task:\nWhat is the capital of France?\n\nContext:\nGeography quiz\n\n"
        "Answer to judge:\nParis."
    )


async def test_the_evaluator_scores_on_zero_to_one_and_passes_on_the_threshold() -> None:
    def answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
        score = 5 if agent == AGENTS[0] else 2  # two judges at 2 of 1..5, one at 5
        if (agent, dimension) == (AGENTS[2], "dim9"):
            return httpx.Response(401, json={"error": {"message": "bad key"}})
        return completion(json.dumps(opinion(dimension, score=score)))

    provider = ScriptedProvider(answer)
    async with provider.model() as model:
        evaluate = JudgePanel(model, AGENTS, DIMENSIONS, pass_threshold=0.55).evaluator()
        entry = await evaluate(task=None, answer=["Paris", "France"], traces={})
        plain = await JudgePanel(model, AGENTS, ["dim0"]).evaluator("panel")(
            task=None, answer="x", traces={}
        )
    assert entry["evaluator"] == "judge_panel" and len(entry["opinions"]) == 30
    assert entry["score"] == pytest.approx((10 * 1.0 + 19 * 0.25) / 29)
    assert entry["passed"] is False and entry["calls"] == 30  # 0.509 < 0.55
    (error,) = entry["errors"]
    assert error["agent"] == AGENTS[2] and error["status_code"] == 401
    assert plain["evaluator"] == "panel" and "passed" not in plain
    assert plain["score"] == pytest.approx((1.0 + 0.25 + 0.25) / 3)


def test_bad_panels_are_refused() -> None:
    model = OpenAIChatModel(sim_config=SimConfig())
    with pytest.raises(ValueError, match="distinct"):
        JudgePanel(model, AGENTS, ["a", "a"])
    with pytest.raises(ValueError, match="at least one agent"):
        JudgePanel(model, [], DIMENSIONS)
    with pytest.raises(TypeError):
        JudgePanel(model, "judge", DIMENSIONS)
    with pytest.raises(ValueError, match="score_range"):
        JudgePanel(model, AGENTS, DIMENSIONS, score_range=(5, 1))
    with pytest.raises(ValueError, match="pass_threshold"):
        JudgePanel(model, AGENTS, DIMENSIONS, pass_threshold=3)


@pytest.mark.parametrize(("batching", "calls"), [("false", 30), ("true", 3)])
def test_the_example_makes_30_calls_or_3_batched(tmp_path: Path, batching: str, calls: int) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "asynceval.cli", "run", str(ROOT / "examples" / "judge_panel.py"),
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "BATCHING_ENABLED": batching},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (report,) = [r for r in records if r.get("type") != "header"]
    assert report["status"] == "success"
    (entry,) = report["eval"]
    assert len(entry["opinions"]) == 30 and entry["errors"] == [] and entry["calls"] == calls
    assert all(o["score"] is not None for o in entry["opinions"])
    assert report["usage"]["llm_calls"] == calls
    lines = (out / "events.jsonl").read_text().splitlines()
    acquired = [e for e in map(json.loads, lines) if e["event"] == "acquired"]
    assert len(acquired) == calls


async def test_a_model_declared_without_structured_output_makes_the_panel_ask_in_the_prompt() -> (
    None
):
    provider = ScriptedProvider()
    model = OpenAIChatModel(
        "m",
        base_url="http://provider.test/v1",
        settings=Settings(retry_initial_delay=0.01, retry_max_delay=0.02),
        controller=ConcurrencyController(5),
        transport=httpx.MockTransport(provider),
        structured_output=False,  # a setting on the model: the provider has no JSON schemas
    )
    async with model:
        result = await JudgePanel(model, AGENTS, DIMENSIONS).evaluate("Paris.")
    assert_complete(result)
    assert provider.structured == 0 and provider.unstructured == 30


async def test_a_failing_provider_does_not_stop_a_benchmark_run_using_the_panel() -> None:
    from asynceval import Benchmark

    model = OpenAIChatModel(
        settings=Settings(retry_initial_delay=0.001, retry_max_delay=0.002),
        controller=ConcurrencyController(5),
        sim_config=SimConfig(latency=0, fault_rates={503: 1.0}, retry_after=0),
    )
    panel = JudgePanel(model, AGENTS, DIMENSIONS)

    class Judged(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            return [lambda query: "Paris."], {}

        async def setup_evaluators(
            self, environment: Any, task: Task, agents: Any, user: Any
        ) -> Any:
            return [panel.evaluator()]

    async with model:
        reports = await Judged().run(
            [Task(query="Capital of France?", id=f"t{i}") for i in range(2)]
        )
    for report in reports:
        (verdict,) = report["eval"]
        # the run went on; the repetition is incomplete, as if its agent's call had failed
        assert report["status"] == "evaluation_failed" and len(verdict["opinions"]) == 30
        assert report["error"]["type"] == "LLMCallFailed"
        assert {o["score"] for o in verdict["opinions"]} == {None}
        assert len(verdict["errors"]) == 30
