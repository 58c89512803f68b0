"""`setup_from_env`: the global tracer and meter providers asynceval sets up itself when
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) asks for an OTLP export and
the application set none: the SDK's providers with a batch span processor and a periodic metric
reader, each on the OTLP/HTTP exporter (the `otel` extra). The SDK reads every other OTEL_*
variable itself (headers, service name, resource attributes, batch delays); asynceval names the
service `asynceval` when OTEL_SERVICE_NAME does not. OTEL_TRACES_EXPORTER=none or
OTEL_METRICS_EXPORTER=none leaves that signal's provider unset (a backend that takes traces
only, such as Phoenix, refuses metrics).

OpenTelemetry's own variables are read here, at the edge where the SDK would read them; nothing
else in asynceval reads them, and no asynceval setting stands for them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping

_logger = logging.getLogger("asynceval.telemetry")
_lock = threading.Lock()
_done: list[bool] = []  # once per process: [whether it set the providers up]
# (a module-level record, not a Runtime's: OpenTelemetry's global providers are per process)

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def endpoint_configured(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for an OTLP export (and OpenTelemetry is not disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name) for name in _ENDPOINTS)


def setup_from_env() -> bool:
    """Set up the global providers for OTLP export from the environment, once per process;
    True when they are set (by this call or an earlier one). False, with one warning, when the
    SDK or the OTLP/HTTP exporter is not installed (`pip install 'asynceval[otel]'`); False
    when the environment asks for no export or the application set a provider already (its
    providers are then the ones used)."""
    with _lock:
        if _done:
            return _done[0]
        if not endpoint_configured(os.environ):
            return False  # asked again later, the environment may say otherwise
        _done.append(False)
        try:
            from opentelemetry import metrics, trace
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            _logger.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but %s is not installed: no traces are "
                "exported (pip install 'asynceval[otel]')",
                exc.name,
            )
            return False
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "asynceval"}
        resource = Resource.create(attributes)
        # OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER=none turn a signal off, as the SDK's own
        # setup does (a backend that takes traces only, e.g. Phoenix, refuses metrics: 405).
        if _exporter("OTEL_TRACES_EXPORTER") != "none":
            tracer_provider = TracerProvider(resource=resource)
            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            trace.set_tracer_provider(tracer_provider)
        if _exporter("OTEL_METRICS_EXPORTER") != "none":
            reader = PeriodicExportingMetricReader(OTLPMetricExporter())
            metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
        # Set only if none was: an application's provider set in between stays (the API keeps
        # the first and warns); either way there is one now.
        _done[0] = True
        return True


def _exporter(name: str) -> str:
    """The exporter an OTEL_*_EXPORTER variable names ("otlp" when unset); "none" turns it off."""
    return os.environ.get(name, "otlp").strip().lower() or "otlp"


def flush_if_set_up(timeout_s: float = 10.0) -> None:
    """Export what the providers `setup_from_env` set up still hold (a run's end: its spans
    are sent before the process exits); blocking, so call it from a worker thread. An
    application's own providers are its to flush: left alone."""
    if not (_done and _done[0]):
        return
    from opentelemetry import metrics, trace

    millis = int(timeout_s * 1000)
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            try:
                force_flush(millis)
            except Exception:  # an exporter's failure is the backend's, not the run's
                _logger.warning("OpenTelemetry export failed at the end of the run", exc_info=True)
