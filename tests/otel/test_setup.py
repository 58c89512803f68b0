"""Turning telemetry on and off: OTEL_EXPORTER_OTLP_ENDPOINT sets the SDK up (spans and metrics
exported over OTLP/HTTP at the run's end); no provider set, or no OpenTelemetry installed,
records nothing and never imports the SDK. Each runs in a fresh interpreter: the global
providers can be set once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ._collector import Collector

BENCH = """
import asyncio, json, sys
from asynceval import Benchmark, OpenAIChatModel, Task

class Ask(Benchmark):
    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel(model="sim-model")
        async def agent(query):
            return (await model.generate([{"role": "user", "content": query}])).text
        return [agent], {}

reports = asyncio.run(Ask(n_task_repeats=2).run([Task(id="a", query="hi"), Task(id="b", query="yo")]))
assert {r["status"] for r in reports} == {"success"}, reports
from asynceval.telemetry import current_telemetry
print(json.dumps({
    "modules": sorted({m for m in sys.modules if m.startswith("opentelemetry")}),
    "telemetry": current_telemetry() is not None,
}))
"""


def run_script(script: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_otlp_endpoint_sets_the_sdk_up_and_the_run_is_exported_at_its_end() -> None:
    with Collector() as collector:
        found = run_script(BENCH, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint)
        assert found["telemetry"] is True
        assert collector.posts["/v1/traces"] >= 1
        assert collector.posts["/v1/metrics"] >= 1
        [run] = collector.named("asynceval.run")
        repetitions = collector.named("asynceval.repetition")
        calls = collector.named("chat sim-model")
        assert len(repetitions) == 4 and len(calls) == 4
        assert {s.trace_id for s in repetitions + calls} == {run.trace_id}
        assert {s.parent_span_id for s in repetitions} == {run.span_id}


def test_with_no_provider_set_nothing_is_recorded_and_the_sdk_is_not_imported() -> None:
    """The application imported the OpenTelemetry API but set no provider: the run decides
    'off' (the API's proxy provider) and never loads the SDK."""
    found = run_script("import opentelemetry.trace\n" + BENCH)
    assert found["telemetry"] is False
    assert not [m for m in found["modules"] if m.startswith("opentelemetry.sdk")]  # type: ignore[attr-defined]


def test_a_run_that_never_touched_opentelemetry_never_imports_it() -> None:
    found = run_script(BENCH)
    assert found == {"modules": [], "telemetry": False}


def test_without_opentelemetry_installed_a_run_still_runs_even_asked_to_export() -> None:
    """OpenTelemetry hidden from the interpreter, OTEL_EXPORTER_OTLP_ENDPOINT set: the run
    succeeds, records nothing, and imports no part of it."""
    hide = (
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ImportError(f'no module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
    )
    found = run_script(hide + BENCH, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert found == {"modules": [], "telemetry": False}


def test_a_signal_whose_exporter_is_none_is_not_exported() -> None:
    """OTEL_METRICS_EXPORTER=none (a backend that takes traces only: Phoenix answers 405 to
    metrics) sends the spans and no metrics; OTEL_TRACES_EXPORTER=none the other way round."""
    with Collector() as collector:
        run_script(
            BENCH, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_METRICS_EXPORTER="none"
        )
        assert collector.posts["/v1/traces"] >= 1 and collector.posts["/v1/metrics"] == 0
    with Collector() as collector:
        run_script(
            BENCH, OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_TRACES_EXPORTER="none"
        )
        assert collector.posts["/v1/traces"] == 0 and collector.posts["/v1/metrics"] >= 1
