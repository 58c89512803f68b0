"""Metrics with the SDK's in-memory reader: the GenAI client metrics under their current names,
the previous names too under OTEL_SEMCONV_STABILITY_OPT_IN, and the limiter's gauges."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from asynceval import Task
from asynceval.sim import SimConfig
from asynceval.telemetry import Telemetry, telemetry_scope

from .conftest import Ask, Recorded, providers

TASKS = [Task(id=f"t{i}", query=f"what is {i}+1?") for i in range(4)]
CURRENT = {
    "gen_ai.client.inference.duration",
    "gen_ai.client.inference.usage.input_tokens",
    "gen_ai.client.inference.usage.output_tokens",
    "gen_ai.client.inference.operation.input_tokens",
    "gen_ai.client.inference.operation.output_tokens",
}
PREVIOUS = {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"}


def total(points: list[Any]) -> float:
    return sum(p.value for p in points)


async def test_calls_are_counted_under_the_current_genai_metric_names(recorded: Recorded) -> None:
    reports = await Ask().run(TASKS)
    tokens_in = sum(r["usage"]["prompt_tokens"] for r in reports)
    tokens_out = sum(r["usage"]["completion_tokens"] for r in reports)
    metrics = recorded.metrics()
    assert set(metrics) >= CURRENT
    assert not set(metrics) & PREVIOUS
    [duration] = metrics["gen_ai.client.inference.duration"]
    assert duration.count == 4 and duration.sum > 0
    assert dict(duration.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "sim-model",
        "gen_ai.response.model": "sim-model",
        "server.address": "asynceval-sim",
        "server.port": 80,
    }
    assert total(metrics["gen_ai.client.inference.usage.input_tokens"]) == tokens_in
    assert total(metrics["gen_ai.client.inference.usage.output_tokens"]) == tokens_out
    [counted] = metrics["gen_ai.client.inference.usage.input_tokens"]
    assert counted.attributes["gen_ai.token.modality"] == "unknown"
    [per_call] = metrics["gen_ai.client.inference.operation.input_tokens"]
    assert per_call.count == 4 and per_call.sum == tokens_in


async def test_a_failed_call_is_timed_with_its_error_type_and_counts_no_tokens(
    recorded: Recorded,
) -> None:
    await Ask(SimConfig(latency=0.0, fail_first=5, fail_first_status=503)).run(TASKS[:1])
    metrics = recorded.metrics()
    [duration] = metrics["gen_ai.client.inference.duration"]
    assert duration.attributes["error.type"] == "503"
    assert total(metrics["gen_ai.client.inference.usage.input_tokens"]) == 0
    assert "gen_ai.client.inference.operation.input_tokens" not in metrics


async def test_the_opt_in_writes_the_previous_names_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental/dup")
    assert Telemetry().previous_metrics  # read from the environment when not given
    telemetry, recorded = providers(previous_metrics=True)
    with telemetry_scope(telemetry):
        reports = await Ask().run(TASKS)
    metrics = recorded.metrics()
    assert set(metrics) >= CURRENT | PREVIOUS
    [old_duration] = metrics["gen_ai.client.operation.duration"]
    assert old_duration.count == 4
    usage = {p.attributes["gen_ai.token.type"]: p for p in metrics["gen_ai.client.token.usage"]}
    assert usage["input"].sum == sum(r["usage"]["prompt_tokens"] for r in reports)
    assert usage["output"].sum == sum(r["usage"]["completion_tokens"] for r in reports)
    assert usage["input"].attributes["gen_ai.request.model"] == "sim-model"


@pytest.mark.parametrize("value", [None, "", "gen_ai_latest_experimental", "http/dup"])
def test_without_the_dup_value_only_the_current_names(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    else:
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", value)
    assert not Telemetry().previous_metrics


async def test_the_limiter_gauges_show_calls_in_flight_and_queued(recorded: Recorded) -> None:
    """Eight repetitions at once on four slots, each call 0.3 s: mid-run, 4 in flight, 4 in
    line; after the run, none."""
    bench = Ask(SimConfig(latency=0.3), max_concurrent_tasks=8)
    tasks = [Task(id=f"g{i}", query="hello") for i in range(8)]
    seen: dict[str, Any] = {}

    async def look() -> None:
        await anyio.sleep(0.15)
        seen.update(recorded.metrics())

    async with anyio.create_task_group() as tg:
        tg.start_soon(look)
        await bench.run(tasks)
    [in_flight] = seen["asynceval.limiter.in_flight"]
    [queued] = seen["asynceval.limiter.queued"]
    [limit] = seen["asynceval.limiter.limit"]
    assert (in_flight.value, queued.value, limit.value) == (4, 4, 4)
    after = recorded.metrics()
    assert [p.value for p in after["asynceval.limiter.in_flight"]] == [0]
    assert [p.value for p in after["asynceval.limiter.queued"]] == [0]


async def test_an_endpoints_lowered_limit_is_a_gauge_per_endpoint(recorded: Recorded) -> None:
    """A provider that serves two at once answers 429 beside our other calls in flight: its
    endpoint's adaptive limit drops from 4 to 2 (and may grow back by one as calls succeed)."""
    bench = Ask(SimConfig(latency=0.05, max_concurrency=2, retry_after=0.01))
    await bench.run([Task(id=f"c{i}", query="hi") for i in range(8)])
    points = recorded.metrics()["asynceval.limiter.endpoint_limit"]
    [(endpoint, value)] = [(p.attributes["asynceval.endpoint"], p.value) for p in points]
    assert endpoint == "http://asynceval-sim/v1"
    assert 2 <= value < 4
