"""Spans of a run, its repetitions and their LLM calls (our models on the embedded simulated
provider), with the GenAI conventions' attributes, retries as events and scores as events."""

from __future__ import annotations

import pytest

from asynceval import OpenAIChatModel, Task
from asynceval.sim import SimConfig
from asynceval.telemetry import (
    EVALUATION_EVENT,
    REPETITION_SPAN,
    RETRY_EVENT,
    RUN_SPAN,
    telemetry_scope,
)

from .conftest import Ask, Recorded

TASKS = [Task(id=f"t{i}", query=f"what is {i}+1?") for i in range(3)]


async def test_a_run_is_a_span_with_a_child_per_repetition_and_a_grandchild_per_call(
    recorded: Recorded,
) -> None:
    await Ask(n_task_repeats=2).run(TASKS)
    [run] = recorded.spans(RUN_SPAN)
    repetitions = recorded.spans(REPETITION_SPAN)
    calls = recorded.spans("chat sim-model")
    assert len(repetitions) == 6 and len(calls) == 6
    assert run.parent is None
    assert {r.parent.span_id for r in repetitions if r.parent} == {run.context.span_id}
    assert {s.context.trace_id for s in [*repetitions, *calls]} == {run.context.trace_id}
    by_span = {r.context.span_id: r for r in repetitions}
    pairs = set()
    for call in calls:
        assert call.parent is not None
        parent = by_span[call.parent.span_id]  # each call's parent is a repetition's span
        pairs.add(
            (parent.attributes["asynceval.task_id"], parent.attributes["asynceval.repeat_idx"])
        )
    assert pairs == {(f"t{i}", r) for i in range(3) for r in range(2)}
    assert run.attributes["asynceval.benchmark"] == "Ask"
    assert run.attributes["asynceval.n_tasks"] == 3
    assert run.attributes["asynceval.count.success"] == 6
    assert run.attributes["asynceval.backend"] == "local"


async def test_a_call_span_has_the_genai_attributes(recorded: Recorded) -> None:
    await Ask().run(TASKS[:1])
    [call] = recorded.spans("chat sim-model")
    a = call.attributes
    assert call.kind.name == "CLIENT"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "sim-model"
    assert a["gen_ai.response.model"] == "sim-model"
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    assert a["server.address"] == "asynceval-sim" and a["server.port"] == 80
    assert a["asynceval.call_id"] and a["asynceval.lane"] == "live"
    assert a["asynceval.agent"] == "asker"
    assert a["asynceval.attempts"] == 1
    assert a["asynceval.queue_wait_s"] >= 0
    assert "error.type" not in a
    assert call.status.status_code.name == "UNSET"


async def test_a_repetition_span_says_its_status_and_its_score_as_an_evaluation_event(
    recorded: Recorded,
) -> None:
    await Ask().run(TASKS[:1])
    [repetition] = recorded.spans(REPETITION_SPAN)
    a = repetition.attributes
    assert a["asynceval.task_id"] == "t0" and a["asynceval.repeat_idx"] == 0
    assert a["asynceval.status"] == "success"
    assert a["asynceval.score"] == 1.0  # "passed" decides the repetition's score
    assert a["asynceval.llm_calls"] == 1
    assert a["asynceval.run_id"]
    [event] = [e for e in repetition.events if e.name == EVALUATION_EVENT]
    assert dict(event.attributes or {}) == {
        "gen_ai.evaluation.name": "judge",
        "gen_ai.evaluation.score.value": 0.75,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "fine",
    }


async def test_each_retry_is_an_event_of_its_call_span(recorded: Recorded) -> None:
    """The simulated provider answers 503 to each request's first two attempts: one call span,
    three attempts, two retry events with their status."""
    await Ask(SimConfig(latency=0.0, fail_first=2, fail_first_status=503)).run(TASKS[:1])
    [call] = recorded.spans("chat sim-model")
    retries = [e for e in call.events if e.name == RETRY_EVENT]
    assert [e.attributes["attempt"] for e in retries] == [1, 2]  # type: ignore[index]
    assert {e.attributes["status_code"] for e in retries} == {503}  # type: ignore[index]
    assert call.attributes["asynceval.attempts"] == 3
    assert "error.type" not in call.attributes


async def test_a_call_that_fails_for_good_has_its_error_type(recorded: Recorded) -> None:
    await Ask(SimConfig(latency=0.0, fail_first=5, fail_first_status=503)).run(TASKS[:1])
    [call] = recorded.spans("chat sim-model")
    assert call.attributes["error.type"] == "503"
    assert call.status.status_code.name == "ERROR"
    assert call.attributes["asynceval.attempts"] == 3  # RETRY_MAX_ATTEMPTS
    [repetition] = recorded.spans(REPETITION_SPAN)
    assert repetition.status.status_code.name == "ERROR"
    assert repetition.attributes["asynceval.status"] != "success"


async def test_a_priced_calls_span_says_what_it_cost(recorded: Recorded) -> None:
    """The simulated provider's own model has a price: the call's `asynceval.cost_usd` is what
    the repetition's report counts, and the repetition's span says it too."""
    bench = Ask()
    bench.model = OpenAIChatModel(sim_config=SimConfig(latency=0.0))  # model asynceval-sim
    [report] = await bench.run(TASKS[:1])
    [call] = recorded.spans("chat asynceval-sim")
    assert call.attributes["asynceval.cost_usd"] == pytest.approx(report["usage"]["cost_usd"])
    assert report["usage"]["cost_usd"] > 0
    [repetition] = recorded.spans(REPETITION_SPAN)
    assert repetition.attributes["asynceval.cost_usd"] == report["usage"]["cost_usd"]


async def test_a_call_outside_any_run_is_a_root_span(recorded: Recorded) -> None:
    model = OpenAIChatModel(model="solo", sim_config=SimConfig(latency=0.0))
    await model.generate([{"role": "user", "content": "hi"}])
    [call] = recorded.spans("chat solo")
    assert call.parent is None
    assert call.attributes["gen_ai.usage.output_tokens"] > 0


async def test_a_run_bound_off_records_nothing(recorded: Recorded) -> None:
    """`telemetry_scope(None)` inside a block with telemetry: the run decides off, and its
    calls record nothing, though their route was built where telemetry was on."""
    bench = Ask()
    await bench.model.generate([{"role": "user", "content": "warm the route"}])
    before = len(recorded.spans())
    with telemetry_scope(None):
        await bench.run(TASKS)
    assert len(recorded.spans()) == before
