"""`Telemetry`: asynceval's tracer and instruments on one tracer provider and one meter
provider, and how a run or a call finds them (`current_telemetry`, `telemetry_scope`).

The decision is made once per run (and once per route, for calls made outside any run), never
per call: a run binds what it found for its whole context, a call reads one context variable.
With no provider set, or OpenTelemetry not installed, that value is None and nothing else
happens. OpenTelemetry is imported only when the application has imported it itself (it set a
provider) or asked asynceval to set one up (OTEL_EXPORTER_OTLP_ENDPOINT): the base install has
no OpenTelemetry, and `import asynceval` never loads it.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from . import _names as n

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
    from opentelemetry.trace import Tracer, TracerProvider


class _Statistics(Protocol):
    @property
    def active(self) -> int: ...
    @property
    def waiting(self) -> int: ...
    @property
    def limit(self) -> int: ...
    @property
    def endpoint_limits(self) -> dict[str, int]: ...


class Limiter(Protocol):
    """What the limiter gauges read: `asynceval.limits.ConcurrencyController` is one."""

    def statistics(self) -> _Statistics: ...


class Telemetry:
    """asynceval's spans and metrics on `tracer_provider` and `meter_provider`.

    Either may be None: no spans, or no metrics. Build one to send a run's telemetry to
    providers of your own (tests: the SDK's in-memory exporter and reader) and bind it with
    `telemetry_scope`; with none bound, asynceval uses the global providers the application set
    (`opentelemetry.trace.set_tracer_provider`, `opentelemetry.metrics.set_meter_provider`),
    else those `setup_from_env` sets up from OTEL_EXPORTER_OTLP_ENDPOINT.

    `previous_metrics` writes the GenAI conventions' previous metric names beside the current
    ones (default: OTEL_SEMCONV_STABILITY_OPT_IN holds `gen_ai_latest_experimental/dup`).
    Instruments are created once per Telemetry; the limiter gauges observe every limiter
    `watch_limiter` was given (held weakly) at each collection.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        previous_metrics: bool | None = None,
    ) -> None:
        from opentelemetry.trace import SpanKind

        if previous_metrics is None:
            previous_metrics = n.previous_metrics_opted_in(os.environ.get(n.OPT_IN_VARIABLE))
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.previous_metrics = previous_metrics
        self.tracer: Tracer | None = None
        if tracer_provider is not None:
            self.tracer = tracer_provider.get_tracer(n.INSTRUMENTATION, _version())
        self.client_kind = SpanKind.CLIENT
        self.metrics: _Metrics | None = None
        self._limiters: weakref.WeakSet[Any] = weakref.WeakSet()
        if meter_provider is not None:
            self.metrics = _Metrics(meter_provider, previous_metrics, self._observe)

    def watch_limiter(self, limiter: Limiter) -> None:
        """Observe `limiter` in the gauges (`asynceval.limiter.in_flight`, `.queued`, `.limit`
        and `.endpoint_limit`) for as long as it lives."""
        if self.metrics is not None:
            self._limiters.add(limiter)

    def _observe(self) -> tuple[int, int, int, dict[str, int]]:
        """The watched limiters, summed: in flight, queued, limit, and per endpoint whose
        adaptive limit is below the limit, the lowest such limit."""
        active = waiting = limit = 0
        endpoints: dict[str, int] = {}
        for limiter in list(self._limiters):
            stats = limiter.statistics()
            active += stats.active
            waiting += stats.waiting
            limit += stats.limit
            for endpoint, value in stats.endpoint_limits.items():
                endpoints[endpoint] = min(value, endpoints.get(endpoint, value))
        return active, waiting, limit, endpoints

    def __repr__(self) -> str:
        return (
            f"Telemetry(tracer_provider={self.tracer_provider!r}, "
            f"meter_provider={self.meter_provider!r}, previous_metrics={self.previous_metrics})"
        )


class _Metrics:
    """The instruments of one meter: the GenAI client metrics (current, and the previous ones
    if asked) and the limiter gauges."""

    def __init__(self, provider: MeterProvider, previous: bool, observe: Any) -> None:
        meter = provider.get_meter(n.INSTRUMENTATION, _version())
        self.duration = meter.create_histogram(
            *n.INFERENCE_DURATION,
            "Duration of a GenAI inference call, its queue wait and retries included.",
            explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
        )
        self.input_tokens = meter.create_counter(*n.USAGE_INPUT_TOKENS, "Input tokens used.")
        self.output_tokens = meter.create_counter(*n.USAGE_OUTPUT_TOKENS, "Output tokens used.")
        self.cache_read = meter.create_counter(*n.USAGE_CACHE_READ, "Input tokens read from cache.")
        self.cache_write = meter.create_counter(*n.USAGE_CACHE_WRITE, "Input tokens cached.")
        self.operation_input = meter.create_histogram(
            *n.OPERATION_INPUT_TOKENS,
            "Input tokens per inference call.",
            explicit_bucket_boundaries_advisory=n.TOKEN_BUCKETS,
        )
        self.operation_output = meter.create_histogram(
            *n.OPERATION_OUTPUT_TOKENS,
            "Output tokens per inference call.",
            explicit_bucket_boundaries_advisory=n.TOKEN_BUCKETS,
        )
        self.previous_duration = self.previous_tokens = None
        if previous:
            self.previous_duration = meter.create_histogram(
                *n.OPERATION_DURATION,
                "GenAI operation duration.",
                explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
            )
            self.previous_tokens = meter.create_histogram(
                *n.TOKEN_USAGE,
                "Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=n.TOKEN_BUCKETS,
            )
        self._observe = observe
        gauges = (
            (n.LIMITER_IN_FLIGHT, "LLM calls holding a slot.", self._in_flight),
            (n.LIMITER_QUEUED, "LLM calls waiting for a slot.", self._queued),
            (n.LIMITER_LIMIT, "Slots in all (MAX_CONCURRENT_LLM_CALLS).", self._limit),
            (n.LIMITER_ENDPOINT_LIMIT, "An endpoint's adaptive limit.", self._endpoint_limits),
        )
        for (name, unit), description, callback in gauges:
            meter.create_observable_gauge(name, [callback], unit, description)

    def _in_flight(self, options: CallbackOptions) -> Iterable[Observation]:
        return _observations(self._observe()[0])

    def _queued(self, options: CallbackOptions) -> Iterable[Observation]:
        return _observations(self._observe()[1])

    def _limit(self, options: CallbackOptions) -> Iterable[Observation]:
        return _observations(self._observe()[2])

    def _endpoint_limits(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(v, {n.ENDPOINT: e}) for e, v in self._observe()[3].items()]


def _observations(value: int) -> list[Observation]:
    from opentelemetry.metrics import Observation

    return [Observation(value)]


def _version() -> str:
    from .._version import __version__

    return __version__


_bound: ContextVar[Telemetry | None] = ContextVar("asynceval_telemetry")
"""The telemetry bound in this context (a run binds what it found, None included)."""
_UNBOUND: Any = object()


def bound_or(default: Telemetry | None) -> Telemetry | None:
    """The telemetry bound in this context (None: off), else `default` (a route's, found when
    it was built): what each call reads, once."""
    return _bound.get(default)


@contextmanager
def telemetry_scope(telemetry: Telemetry | None) -> Iterator[Telemetry | None]:
    """Bind `telemetry` (None: off) for the runs and calls made in this block, whatever the
    global providers are. A run binds its own for its repetitions and calls."""
    token = _bound.set(telemetry)
    try:
        yield telemetry
    finally:
        _bound.reset(token)


def current_telemetry() -> Telemetry | None:
    """The telemetry a run starting here uses: the one bound in this context (`telemetry_scope`),
    else the global providers' if the application set one (a tracer provider, a meter provider,
    or both), else those `setup_from_env` sets up when OTEL_EXPORTER_OTLP_ENDPOINT asks for
    them; None when there are none (or OpenTelemetry is not installed)."""
    bound = _bound.get(_UNBOUND)
    if bound is not _UNBOUND:
        return bound  # type: ignore[no-any-return]
    return global_telemetry()


_lock = threading.Lock()
_global: dict[tuple[int, int], Telemetry] = {}  # one per pair of global providers


def global_telemetry() -> Telemetry | None:
    """The telemetry of the global providers (see `current_telemetry`), built once per pair."""
    from ._setup import endpoint_configured, setup_from_env

    configured = endpoint_configured(os.environ)
    if "opentelemetry.trace" not in sys.modules and not configured:
        return None  # the application never imported OpenTelemetry: it set no provider
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        return None
    tracer_provider: Any = trace.get_tracer_provider()
    meter_provider: Any = metrics.get_meter_provider()
    if not _real(tracer_provider) and not _real(meter_provider):
        if not (configured and setup_from_env()):
            return None
        tracer_provider, meter_provider = trace.get_tracer_provider(), metrics.get_meter_provider()
    tracing = tracer_provider if _real(tracer_provider) else None
    metering = meter_provider if _real(meter_provider) else None
    key = (id(tracing), id(metering))
    with _lock:
        found = _global.get(key)
        if found is None or (found.tracer_provider, found.meter_provider) != (tracing, metering):
            found = _global[key] = Telemetry(tracing, metering)
        return found


def _real(provider: object) -> bool:
    """Whether a global provider is one the application (or `setup_from_env`) set: not the API's
    proxy (nothing set yet) nor its no-op."""
    name = type(provider).__name__
    return not (name.startswith("_Proxy") or name.startswith(("Proxy", "NoOp")))


def carrier() -> Mapping[str, str] | None:
    """The current span's W3C trace context as a carrier (`traceparent`, `tracestate`), for work
    sent to another process (a Dask worker) whose spans join this trace; None with no span."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    found: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(found)
    return found or None
