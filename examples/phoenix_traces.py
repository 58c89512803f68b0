"""A run's traces in Arize Phoenix: the application sets an OpenTelemetry SDK tracer provider that
exports to Phoenix over OTLP/HTTP, and every run under it is a trace there (the run, a child span
per repetition, a `chat asynceval-sim` span per LLM call under its repetition).

Runs on the embedded simulated provider. Phoenix, in a virtual environment of its own (it pins
packages the dev extra needs newer), then this script from a checkout with the `otel` extra:

    python3 -m venv /tmp/phoenix && /tmp/phoenix/bin/pip install arize-phoenix
    /tmp/phoenix/bin/phoenix serve            # UI and OTLP/HTTP on http://localhost:6006
    .venv/bin/python examples/phoenix_traces.py

Phoenix is found at PHOENIX_COLLECTOR_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT, else
http://localhost:6006; the spans go to `/v1/traces` there, in Phoenix's project `asynceval`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from asynceval import Benchmark, OpenAIChatModel, Task

PROJECT = "asynceval"


def phoenix_url() -> str:
    """Phoenix's base URL (its UI; OTLP/HTTP at /v1/traces)."""
    url = os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:6006"
    )
    return url.rstrip("/").removesuffix("/v1/traces")


class RunTraces(SpanProcessor):
    """Notes the trace id of each run span that ends, to say where to look."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == "asynceval.run" and span.context is not None:
            self.trace_ids.append(f"{span.context.trace_id:032x}")


class TwoSteps(Benchmark):
    """(a * b) + 1 in two questions: the product, then one more than the model's answer."""

    def __init__(self, model: OpenAIChatModel) -> None:
        super().__init__(n_task_repeats=2)
        self.model = model

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        async def solver(query: str) -> str:
            product = await self.model.generate(query, agent="solver")
            step = f"What is {product.text.strip()} + 1?"
            return (await self.model.generate(step, agent="solver")).text.strip()

        return [solver], {"solver": solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        def exact_match(task: Task, answer: str, traces: Any) -> dict[str, Any]:
            return {"passed": answer == task.evaluation_data["expected"], "answer": answer}

        return [exact_match]


async def main() -> None:
    tasks = [
        Task(
            query=f"What is {a} * {b}?",
            id=f"{a}x{b}+1",
            evaluation_data={"expected": f"{a * b + 1}"},
        )
        for a, b in ((3, 4), (6, 7), (12, 12))
    ]
    async with OpenAIChatModel() as model:  # LLM_BASE_URL unset: the embedded simulator
        reports = await TwoSteps(model).run(tasks, results_path="results/phoenix.jsonl")
    passed = sum(bool(report["eval"][0]["passed"]) for report in reports)
    print(f"{passed} of {len(reports)} repetitions passed")


if __name__ == "__main__":
    url = phoenix_url()
    resource = Resource.create({"service.name": "asynceval", "openinference.project.name": PROJECT})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{url}/v1/traces")))
    runs = RunTraces()
    provider.add_span_processor(runs)
    trace.set_tracer_provider(provider)  # the application's: every run from here is traced
    anyio.run(main)
    provider.shutdown()  # exports the spans still queued
    print(f"Traces sent to Phoenix at {url}, project {PROJECT!r}:")
    for trace_id in runs.trace_ids:
        print(f"  the run's trace: {url}/redirects/traces/{trace_id}")
