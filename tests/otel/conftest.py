"""OpenTelemetry test fixtures: a fresh tracer provider with the SDK's in-memory exporter and a
fresh meter provider with its in-memory reader per test, bound with `telemetry_scope` (the
global providers are left alone), and a small benchmark on the embedded simulated provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asynceval import Benchmark, OpenAIChatModel, Settings, Task
from asynceval.sim import SimConfig
from asynceval.telemetry import Telemetry, telemetry_scope

FAST = Settings(retry_initial_delay=0.01, retry_max_delay=0.05, max_concurrent_llm_calls=4)
"""Retries that wait a few milliseconds: tests use short real timings."""


class Recorded:
    """What one test's providers recorded: finished spans, and metric points by name."""

    def __init__(self, exporter: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
        self.exporter = exporter
        self.reader = reader

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def metrics(self) -> dict[str, list[Any]]:
        """Every data point collected now, by metric name."""
        data = self.reader.get_metrics_data()
        points: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points


def providers(previous_metrics: bool = False) -> tuple[Telemetry, Recorded]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = Telemetry(tracer_provider, meter_provider, previous_metrics=previous_metrics)
    return telemetry, Recorded(exporter, reader)


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    """A fresh Telemetry bound for the test (runs and calls in it record here)."""
    telemetry, found = providers()
    with telemetry_scope(telemetry):
        yield found


class Ask(Benchmark):
    """Each repetition asks the embedded simulated provider one question (with `sim` faults
    when given) and is scored by one evaluator: passed, score 0.75, with a reason."""

    def __init__(self, sim: SimConfig | None = None, **kw: Any) -> None:
        super().__init__(settings=kw.pop("settings", FAST), **kw)
        self.model = OpenAIChatModel(model="sim-model", sim_config=sim or SimConfig(latency=0.0))

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = self.model

        async def agent(query: str) -> str:
            reply = await model.generate([{"role": "user", "content": query}], agent="asker")
            return reply.text

        return [agent], {}

    async def setup_evaluators(self, *args: Any) -> Any:
        def judge(**_: Any) -> dict[str, Any]:
            return {"name": "judge", "score": 0.75, "passed": True, "reason": "fine"}

        return [judge]
