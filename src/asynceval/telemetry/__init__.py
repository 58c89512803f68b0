"""OpenTelemetry spans and metrics of runs, repetitions and LLM calls (DESIGN section 19),
with the `otel` extra (`pip install 'asynceval[otel]'`); a layer of its own between `limits` and
`events` (it imports config, the kernel and events only; the funnel and the engine feed it).

Turned on by a tracer (or meter) provider: the application's, set with
`opentelemetry.trace.set_tracer_provider` (and `opentelemetry.metrics.set_meter_provider`);
else, when OTEL_EXPORTER_OTLP_ENDPOINT is set and the SDK and the OTLP/HTTP exporter are
installed, the ones asynceval sets up itself (`setup_from_env`, flushed at each run's end);
else a `Telemetry` on providers of your own, bound with `telemetry_scope`. With none of these
(or OpenTelemetry not installed) nothing is recorded and nothing is spent: each run decides
once, at its start, and each call reads one context variable.

What is recorded:

- a span `asynceval.run` per `Benchmark.run` (run id, benchmark, task count, limits, backend;
  at its end the count per status, duration and cost);
- a child span `asynceval.repetition` per task repetition (task id, repeat index, status,
  termination reason, score, attempts, usage, cost), with one `gen_ai.evaluation.result`
  event per evaluator entry (`gen_ai.evaluation.name`, `.score.value`, `.score.label`,
  `.explanation`); on a Dask cluster the workers' repetition spans join the caller's trace
  (a W3C trace context travels with each repetition);
- a span `{operation} {model}` (`chat gpt-4o`, kind CLIENT) per LLM call, ours and the interop
  transports' (the OpenAI SDK's and any framework's through `asynceval.http_client()`) alike,
  child of its repetition's span, with the GenAI conventions' attributes
  (`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
  `gen_ai.response.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
  `server.address`, `server.port`, `error.type`) and asynceval's (`asynceval.call_id`,
  `.lane`, `.agent`, `.dimension`, `.attempts`, `.queue_wait_s`, `.cost_usd`), each retry an
  `asynceval.retry` event. A call answered from the model-call cache or the call journal sends
  nothing and has no span; a call of the batch lane has one (lane `batch`, from its line's
  queueing to its answer, each line sent again a retry event);
- metrics: `gen_ai.client.inference.duration` (histogram, s), the token counters
  `gen_ai.client.inference.usage.input_tokens` / `.output_tokens` / `.cache_read.input_tokens`
  / `.cache_write.input_tokens` and histograms `gen_ai.client.inference.operation.input_tokens`
  / `.output_tokens`; with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental/dup also
  the previous `gen_ai.client.operation.duration` and `gen_ai.client.token.usage` (by
  `gen_ai.token.type`); and the limiter's gauges `asynceval.limiter.in_flight`, `.queued`,
  `.limit` and `.endpoint_limit` (per `asynceval.endpoint` whose adaptive limit is lowered).

Also importable from here for asynceval's own layers, not a public API: `CallSpan` and
`start_call` (the funnel's), `TracedBlock` (the engine's run and repetition spans), `bound_or`,
`carrier`, `flush_if_set_up`.
"""

from typing import TYPE_CHECKING, Any

from ._calls import CallSpan as CallSpan
from ._calls import start_call as start_call
from ._names import EVALUATION_EVENT, REPETITION_SPAN, RETRY_EVENT, RUN_SPAN
from ._spans import TracedBlock as TracedBlock
from ._telemetry import Telemetry, current_telemetry, telemetry_scope
from ._telemetry import bound_or as bound_or
from ._telemetry import carrier as carrier

if TYPE_CHECKING:
    from ._setup import flush_if_set_up as flush_if_set_up
    from ._setup import setup_from_env

__all__ = [
    "EVALUATION_EVENT",
    "REPETITION_SPAN",
    "RETRY_EVENT",
    "RUN_SPAN",
    "Telemetry",
    "current_telemetry",
    "setup_from_env",
    "telemetry_scope",
]


def __getattr__(name: str) -> Any:
    # Setting OpenTelemetry's SDK up (and flushing what it set up) loads with its first use.
    if name in ("setup_from_env", "flush_if_set_up"):
        from . import _setup

        value = getattr(_setup, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
