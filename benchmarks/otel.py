"""OpenTelemetry's cost per LLM call, off and on, measured side by side in one run (DESIGN
section 12: with the SDK and a batch span processor, at most 150 us of CPU per call).

The workload is W1 at 0 ms (the engine's ceiling, where its own CPU is all there is): N
repetitions, each one LLM call to the embedded simulated provider, limit 50, the whole engine
(hooks, events file, results file). Each round runs it three ways, alternating:

- off: telemetry bound off (`telemetry_scope(None)`: what a run decided off does);
- api: `opentelemetry.trace` imported, no provider set, nothing bound: each run decides from
  the global providers (the API's proxy: off);
- sdk: an SDK `TracerProvider` with a `BatchSpanProcessor` on an exporter that drops what it is
  given (the export's serialisation is the backend's cost, not asynceval's), and an SDK
  `MeterProvider` with an in-memory reader: a run span, a repetition span and a call span per
  repetition, the call's metrics, the limiter gauges.

CPU is the process's (`time.process_time`, the batch processor's thread included) per
repetition; "sdk - off" is what OpenTelemetry costs per call, the repetition's span included.

    python benchmarks/otel.py                       # N=5000, 5 rounds
    python benchmarks/otel.py --calls 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from asynceval import OpenAIChatModel, Settings, Task, configure_logging
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig
from asynceval.telemetry import Telemetry, telemetry_scope

sys.path.insert(0, str(Path(__file__).parent))
from call_path import OneCall


class Dropped(SpanExporter):
    """An exporter that counts the spans it is given and sends them nowhere."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def tasks(n: int, tag: str) -> Iterator[Task]:
    for index in range(n):
        yield Task(query=f"What is {index} + {index}?", id=f"{tag}-{index}")


DECIDE: Any = object()
"""Bind nothing: each run decides from the global providers, as an application's runs do."""


async def one_run(n: int, limit: int, out: Path, telemetry: Telemetry | None) -> float:
    """CPU per repetition (us) of one W1 run at 0 ms, with `telemetry` bound (None: off;
    `DECIDE`: none bound)."""
    config = SimConfig(latency=0.0)
    async with OpenAIChatModel(controller=ConcurrencyController(limit), sim_config=config) as model:
        bench = OneCall(model, max_concurrent_tasks=limit)
        with contextlib.nullcontext() if telemetry is DECIDE else telemetry_scope(telemetry):
            await bench.run(tasks(limit * 2, "warm"), collect=False)
            cpu = time.process_time()
            await bench.run(tasks(n, "w1"), results_path=out / "results.jsonl", collect=False)
            return (time.process_time() - cpu) / n * 1e6


def sdk_telemetry() -> tuple[Telemetry, TracerProvider, Dropped]:
    exporter = Dropped()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return Telemetry(tracer_provider, meter_provider), tracer_provider, exporter


async def main(n: int, rounds: int, limit: int) -> None:
    figures: dict[str, list[float]] = {"off": [], "api": [], "sdk": []}
    spans = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        configure_logging(Settings(log_file=str(out / "events.jsonl")))
        await one_run(n, limit, out, None)  # a first run pays for first uses: not counted
        for round_ in range(1, rounds + 1):
            figures["off"].append(await one_run(n, limit, out, None))
            import opentelemetry.trace  # noqa: F401  (the API loaded, no provider set)

            figures["api"].append(await one_run(n, limit, out, DECIDE))
            telemetry, provider, exporter = sdk_telemetry()
            figures["sdk"].append(await one_run(n, limit, out, telemetry))
            provider.force_flush()
            spans = exporter.spans
            provider.shutdown()
            print(
                f"round {round_}: CPU per repetition off {figures['off'][-1]:.1f} us, "
                f"api {figures['api'][-1]:.1f} us, sdk {figures['sdk'][-1]:.1f} us "
                f"(sdk - off {figures['sdk'][-1] - figures['off'][-1]:.1f} us)",
                flush=True,
            )
    off, api, sdk = (statistics.median(figures[k]) for k in ("off", "api", "sdk"))
    print(f"{n} repetitions (one call each, 0 ms, limit {limit}), medians over {rounds} rounds:")
    print(f"  off (no OpenTelemetry)                   {off:7.1f} us CPU per repetition")
    print(f"  api (imported, no provider)              {api:7.1f} us  api/off {api / off:.3f}")
    print(f"  sdk (BatchSpanProcessor, meter)          {sdk:7.1f} us  sdk/off {sdk / off:.3f}")
    per_round = statistics.median(
        s - o for s, o in zip(figures["sdk"], figures["off"], strict=True)
    )
    print(f"  OpenTelemetry with the SDK per call      {sdk - off:7.1f} us (budget 150 us)")
    print(f"  median of the rounds' sdk - off          {per_round:7.1f} us")
    print(
        f"  spans exported by the last sdk round: {spans} (2 runs: 2 run spans, 2 per repetition)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=50)
    args = parser.parse_args()
    sys.setrecursionlimit(10000)
    anyio.run(main, args.calls, args.rounds, args.limit)
