"""`CallSpan`: one LLM call's span (`chat {model}`, kind CLIENT, a child of the current span:
its repetition's) and its metrics, fed by the funnel as the call goes.

The funnel starts it when the call starts (before its queue wait), tells it each attempt's lease
taken (after its wait for a slot), each retry (a span event), each lease released (the tokens
the answer reported and what it cost), and the outcome; it ends when the call has its outcome
and every lease it took is released, so that a streamed answer's span lasts until the stream
is read (its usage is known then). Nothing here may fail a call: a telemetry error is logged
and dropped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from . import _names as n
from ._target import Target, target_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ._telemetry import Telemetry

_logger = logging.getLogger("asynceval.telemetry")


class TokenUsage(Protocol):
    """What an answer reported (`asynceval.llm.Usage` is one)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...


class CallSpan:
    """One call's span and metrics (see the module). Built by `start_call`."""

    __slots__ = (
        "_attributes",
        "_cost",
        "_done",
        "_error",
        "_metrics",
        "_open",
        "_response_model",
        "_started",
        "_usage",
        "attempts",
        "queue_s",
        "span",
    )

    def __init__(self, telemetry: Telemetry, span: Span | None, attributes: dict[str, Any]) -> None:
        self.span = span
        self._metrics = telemetry.metrics
        self._attributes = attributes  # the metrics' (operation, provider, model, server)
        self._started = time.monotonic()
        self._open = 0  # leases taken and not yet released
        self._done = False
        self._usage: TokenUsage | None = None
        self._cost: Decimal | None = None
        self._response_model: str | None = None
        self._error: str | None = None
        self.attempts = 1
        self.queue_s = 0.0

    def attempt_started(self, lease: Any, wait_s: float) -> None:
        """An attempt took `lease` after `wait_s` in line: its release tells `released`."""
        self._open += 1
        self.queue_s += wait_s
        lease.on_release = self.released

    def released(self, usage: TokenUsage | None, cost: Decimal | None) -> None:
        """An attempt's lease was released, its answer reporting `usage` and costing `cost`
        (None: unknown); the span ends here if the call has its outcome already (a stream)."""
        self._open -= 1
        if usage is not None:
            self._usage = usage
        if cost is not None:
            self._cost = cost if self._cost is None else self._cost + cost
        if self._done and self._open <= 0:
            self._end()

    def answered(self, usage: TokenUsage | None, cost: Decimal | None) -> None:
        """The answer of a call that took no lease (a line of the batch lane) reported `usage`
        and cost `cost` (None: unknown)."""
        if usage is not None:
            self._usage = usage
        if cost is not None:
            self._cost = cost if self._cost is None else self._cost + cost

    def retried(self, attempt: int, status_code: int | None, delay_s: float, error: str) -> None:
        """Attempt `attempt` failed and the call goes again after `delay_s`: a span event."""
        if self.span is not None:
            attributes: dict[str, Any] = {"attempt": attempt, "delay_s": delay_s, "error": error}
            if status_code is not None:
                attributes["status_code"] = status_code
            self.span.add_event(n.RETRY_EVENT, attributes)

    def succeeded(self, result: object, attempts: int) -> None:
        """The call returned `result` after `attempts` attempts."""
        self.attempts = attempts
        self._response_model = _response_model(result)
        self._finish()

    def failed(self, error: BaseException, attempts: int) -> None:
        """The call ended with `error` (the funnel's `LLMCallFailed`, a cancellation ...)."""
        self.attempts = attempts
        self._error = error_type(error)
        self._finish()

    def _finish(self) -> None:
        self._done = True
        if self._open <= 0:
            self._end()

    def _end(self) -> None:
        if self._open < 0:
            return  # ended already
        self._open = -1
        try:
            self._record()
        except Exception:  # telemetry must never fail a call
            _logger.warning("asynceval could not record a call's telemetry", exc_info=True)

    def _record(self) -> None:
        usage, error = self._usage, self._error
        attributes = self._attributes
        if self._response_model is not None:
            attributes = {**attributes, n.RESPONSE_MODEL: self._response_model}
        if error is not None:
            attributes = {**attributes, n.ERROR_TYPE: error}
        span = self.span
        if span is not None:
            ended: dict[str, Any] = {n.ATTEMPTS: self.attempts, n.QUEUE_WAIT: self.queue_s}
            if self._response_model is not None:
                ended[n.RESPONSE_MODEL] = self._response_model
            if usage is not None:
                ended[n.INPUT_TOKENS] = usage.prompt_tokens
                ended[n.OUTPUT_TOKENS] = usage.completion_tokens
                if usage.cached_tokens:
                    ended[n.CACHE_READ_TOKENS] = usage.cached_tokens
                if usage.cache_write_tokens:
                    ended[n.CACHE_WRITE_TOKENS] = usage.cache_write_tokens
            if self._cost is not None:
                ended[n.COST] = float(self._cost)
            if error is not None:
                from opentelemetry.trace import StatusCode

                ended[n.ERROR_TYPE] = error
                span.set_status(StatusCode.ERROR, error)
            span.set_attributes(ended)
            span.end()
        if self._metrics is not None:
            _measure(self._metrics, attributes, time.monotonic() - self._started, usage)


def _measure(metrics: Any, attributes: dict[str, Any], duration: float, usage: Any) -> None:
    """The call's metrics: its duration, its tokens (0 under the `unknown` modality when the
    answer reported none, as the conventions ask), and the previous names if asked."""
    metrics.duration.record(duration, attributes)
    counted = {**attributes, n.TOKEN_MODALITY: "unknown"}
    prompt = usage.prompt_tokens if usage is not None else 0
    completion = usage.completion_tokens if usage is not None else 0
    metrics.input_tokens.add(prompt, counted)
    metrics.output_tokens.add(completion, counted)
    if usage is not None:
        if usage.cached_tokens:
            metrics.cache_read.add(usage.cached_tokens, counted)
        if usage.cache_write_tokens:
            metrics.cache_write.add(usage.cache_write_tokens, counted)
        metrics.operation_input.record(prompt, attributes)
        metrics.operation_output.record(completion, attributes)
    if metrics.previous_duration is not None:
        metrics.previous_duration.record(duration, attributes)
        if usage is not None:
            metrics.previous_tokens.record(prompt, {**attributes, n.TOKEN_TYPE: "input"})
            metrics.previous_tokens.record(completion, {**attributes, n.TOKEN_TYPE: "output"})


def start_call(
    telemetry: Telemetry,
    url: object,
    body: object,
    *,
    call_id: str,
    agent: str | None,
    dimension: str | None,
    lane: str,
) -> CallSpan | None:
    """A new call's span, started now as a child of the current span; None for a request that
    is no inference (a file upload, a batch, a model list: no span, no metrics)."""
    target = target_of(str(url))
    if target is None:
        return None
    model = body.get("model") if isinstance(body, Mapping) else None
    metric_attributes = _attributes(target, model if isinstance(model, str) else None)
    span = None
    tracer = telemetry.tracer
    if tracer is not None:
        attributes = {**metric_attributes, n.CALL_ID: call_id, n.LANE: lane}
        if agent is not None:
            attributes[n.AGENT] = agent
        if dimension is not None:
            attributes[n.DIMENSION] = dimension
        if isinstance(body, Mapping):
            _request_parameters(body, attributes)
        name = f"{target.operation} {model}" if isinstance(model, str) else target.operation
        span = tracer.start_span(name, kind=telemetry.client_kind, attributes=attributes)
    return CallSpan(telemetry, span, metric_attributes)


def _attributes(target: Target, model: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        n.OPERATION: target.operation,
        n.PROVIDER: target.provider,
        n.SERVER_ADDRESS: target.address,
        n.SERVER_PORT: target.port,
    }
    if model is not None:
        attributes[n.REQUEST_MODEL] = model
    return attributes


def _request_parameters(body: Mapping[str, Any], attributes: dict[str, Any]) -> None:
    """The request's max tokens and temperature, when it sets them."""
    most = body.get("max_tokens", body.get("max_completion_tokens"))
    if isinstance(most, int) and not isinstance(most, bool):
        attributes[n.REQUEST_MAX_TOKENS] = most
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        attributes[n.REQUEST_TEMPERATURE] = float(temperature)


def _response_model(result: object) -> str | None:
    """The model that answered: a completion's raw body's `model`, or a read JSON response's
    (an httpx response to an SDK); None for a stream or a body that does not say."""
    raw = getattr(result, "raw", None)
    if isinstance(raw, Mapping):
        model = raw.get("model")
        return model if isinstance(model, str) else None
    headers = getattr(result, "headers", None)
    if headers is None or "json" not in headers.get("content-type", ""):
        return None
    try:
        body = json.loads(result.content)  # type: ignore[attr-defined]
    except Exception:  # a stream not read, a body that does not parse: nothing to say
        return None
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def error_type(error: BaseException) -> str:
    """`error.type` for a call that ended with `error`: the provider's HTTP status when it gave
    one, `timeout` when the attempts ran out of time, `cancelled` for a cancellation, else the
    error's class name."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return str(status)
    cause = error.__cause__
    if cause is not None and type(cause).__name__ == "AttemptTimeout":
        return "timeout"
    name = type(error).__name__
    if name == "CancelledError" or name == "Cancelled":
        return "cancelled"
    return name
