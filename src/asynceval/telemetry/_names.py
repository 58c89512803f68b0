"""The names asynceval's telemetry is written under: span names, attribute keys, metric names
and units, in one place (the GenAI semantic conventions' and asynceval's own).

The GenAI conventions moved to their own repository (open-telemetry/semantic-conventions-genai)
in 2026 and renamed their client metrics: `gen_ai.client.operation.duration` became
`gen_ai.client.inference.duration` for inference, and the `gen_ai.client.token.usage` histogram
(split by `gen_ai.token.type`) became per-kind counters (`gen_ai.client.inference.usage.*`,
by `gen_ai.token.modality`) plus per-operation histograms
(`gen_ai.client.inference.operation.*_tokens`). asynceval, a new instrumentation with no users
of the previous names, writes the current ones; with OTEL_SEMCONV_STABILITY_OPT_IN naming the
GenAI conventions' "/dup" value (`previous_metrics_opted_in`) it writes the previous ones too.
"""

from __future__ import annotations

INSTRUMENTATION = "asynceval"
"""The tracer's and the meter's instrumentation scope name."""

RUN_SPAN = "asynceval.run"
"""The span of one `Benchmark.run` (its repetitions' spans are its children)."""
REPETITION_SPAN = "asynceval.repetition"
"""The span of one task repetition (its LLM calls' spans are its children)."""
EVALUATION_EVENT = "gen_ai.evaluation.result"
"""A repetition span's event per evaluator entry (GenAI conventions' evaluation event)."""
RETRY_EVENT = "asynceval.retry"
"""A call span's event per attempt that failed and was retried."""

# GenAI semantic conventions: attributes.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_write.input_tokens"
TOKEN_MODALITY = "gen_ai.token.modality"
TOKEN_TYPE = "gen_ai.token.type"  # the previous token usage histogram's split
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE = "gen_ai.evaluation.score.value"
EVALUATION_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# GenAI semantic conventions: metrics (current), each (name, unit).
INFERENCE_DURATION = ("gen_ai.client.inference.duration", "s")
USAGE_INPUT_TOKENS = ("gen_ai.client.inference.usage.input_tokens", "{token}")
USAGE_OUTPUT_TOKENS = ("gen_ai.client.inference.usage.output_tokens", "{token}")
USAGE_CACHE_READ = ("gen_ai.client.inference.usage.cache_read.input_tokens", "{token}")
USAGE_CACHE_WRITE = ("gen_ai.client.inference.usage.cache_write.input_tokens", "{token}")
OPERATION_INPUT_TOKENS = ("gen_ai.client.inference.operation.input_tokens", "{token}")
OPERATION_OUTPUT_TOKENS = ("gen_ai.client.inference.operation.output_tokens", "{token}")
# The previous generation (semantic-conventions v1.41.0 and before).
OPERATION_DURATION = ("gen_ai.client.operation.duration", "s")
TOKEN_USAGE = ("gen_ai.client.token.usage", "{token}")

DURATION_BUCKETS: tuple[float, ...] = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56)
DURATION_BUCKETS += (5.12, 10.24, 20.48, 40.96, 81.92)
"""The conventions' advised bucket boundaries for the duration histograms (seconds)."""
TOKEN_BUCKETS: tuple[float, ...] = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144)
TOKEN_BUCKETS += (1048576, 4194304, 16777216, 67108864)
"""The conventions' advised bucket boundaries for the token histograms."""

# asynceval's own.
RUN_ID = "asynceval.run_id"
TASK_ID = "asynceval.task_id"
REPEAT_IDX = "asynceval.repeat_idx"
CALL_ID = "asynceval.call_id"
AGENT = "asynceval.agent"
DIMENSION = "asynceval.dimension"
LANE = "asynceval.lane"
ATTEMPTS = "asynceval.attempts"
QUEUE_WAIT = "asynceval.queue_wait_s"
COST = "asynceval.cost_usd"
LIMITER_IN_FLIGHT = ("asynceval.limiter.in_flight", "{call}")
LIMITER_QUEUED = ("asynceval.limiter.queued", "{call}")
LIMITER_LIMIT = ("asynceval.limiter.limit", "{call}")
LIMITER_ENDPOINT_LIMIT = ("asynceval.limiter.endpoint_limit", "{call}")
ENDPOINT = "asynceval.endpoint"

OPT_IN_VARIABLE = "OTEL_SEMCONV_STABILITY_OPT_IN"


def previous_metrics_opted_in(opt_in: str | None) -> bool:
    """Whether OTEL_SEMCONV_STABILITY_OPT_IN's value (a comma-separated list) asks for the
    previous GenAI metric names beside the current ones: an entry of the GenAI conventions
    ending in "/dup" (`gen_ai_latest_experimental/dup`, as `http/dup` for the HTTP
    conventions). `gen_ai_latest_experimental` alone means the current names only, which
    asynceval writes anyway."""
    if not opt_in:
        return False
    entries = (entry.strip().lower() for entry in opt_in.split(","))
    return any(entry.startswith("gen_ai") and entry.endswith("/dup") for entry in entries)
