"""`TracedBlock`: the span of a run (`asynceval.run`) or of a repetition
(`asynceval.repetition`), current in its block so that what runs inside (repetitions, calls)
becomes its children; and what a finished run or repetition writes on its span.

A repetition's span takes its parent from a W3C trace context carrier when its unit of work
carries one (a Dask worker running the caller's repetition: its spans join the caller's trace),
else from the current span (the run's, in process).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import _names as n

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from ._telemetry import Telemetry

_logger = logging.getLogger("asynceval.telemetry")


class TracedBlock:
    """A span current for a `with` block (see the module); ended when the block ends, with an
    error status if an exception ends it. Without a tracer it does nothing."""

    __slots__ = ("_token", "span")

    def __init__(
        self,
        telemetry: Telemetry,
        name: str,
        attributes: Mapping[str, Any],
        parent: Mapping[str, str] | None = None,
    ) -> None:
        self.span: Span | None = None
        self._token: object = None
        if telemetry.tracer is not None:
            self.span = telemetry.tracer.start_span(
                name, context=_extracted(parent), attributes=dict(attributes)
            )

    @classmethod
    def run(cls, telemetry: Telemetry, run_id: str, attributes: Mapping[str, Any]) -> TracedBlock:
        """A run's span: `asynceval.run` with `asynceval.run_id` and `attributes` (keys without
        a dot are put under `asynceval.`; None values are left out)."""
        named = {k if "." in k else f"asynceval.{k}": v for k, v in attributes.items()}
        named[n.RUN_ID] = run_id
        return cls(telemetry, n.RUN_SPAN, {k: v for k, v in named.items() if v is not None})

    @classmethod
    def repetition(
        cls,
        telemetry: Telemetry,
        task_id: str,
        repeat_idx: int,
        run_id: str | None,
        parent: Mapping[str, str] | None,
    ) -> TracedBlock:
        """A repetition's span: `asynceval.repetition`, a child of the span `parent` carries
        (W3C trace context), else of the current one."""
        attributes: dict[str, Any] = {n.TASK_ID: task_id, n.REPEAT_IDX: repeat_idx}
        if run_id is not None:
            attributes[n.RUN_ID] = run_id
        return cls(telemetry, n.REPETITION_SPAN, attributes, parent)

    def __enter__(self) -> TracedBlock:
        if self.span is not None:
            from opentelemetry import context, trace

            self._token = context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self.span
        if span is None:
            return
        from opentelemetry import context
        from opentelemetry.trace import StatusCode

        if self._token is not None:
            context.detach(self._token)  # type: ignore[arg-type]
        if exc is not None:
            span.set_attribute(n.ERROR_TYPE, type(exc).__name__)
            span.set_status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
        span.end()

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add `attributes` (None values are left out) to the span."""
        if self.span is not None:
            self.span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def run_finished(
        self, counts: Mapping[str, int], duration_s: float, interrupted: bool, cost_usd: Any
    ) -> None:
        """What a run's span says at its end: repetitions per status, duration, cost."""
        attributes: dict[str, Any] = {f"asynceval.count.{k}": v for k, v in counts.items()}
        attributes["asynceval.repetitions"] = sum(counts.values())
        attributes["asynceval.duration_s"] = duration_s
        attributes["asynceval.interrupted"] = interrupted
        if isinstance(cost_usd, int | float) and not isinstance(cost_usd, bool):
            attributes[n.COST] = float(cost_usd)
        self.set(attributes)

    def repetition_finished(self, report: Mapping[str, Any], score: float | None) -> None:
        """What a repetition's span says at its end: its status, termination reason, score,
        attempts, usage and cost; one `gen_ai.evaluation.result` event per evaluator entry;
        an error status for any status but success."""
        span = self.span
        if span is None:
            return
        try:
            _repetition_finished(span, report, score)
        except Exception:  # telemetry must never fail a repetition
            _logger.warning("asynceval could not record a repetition's span", exc_info=True)


def _repetition_finished(span: Span, report: Mapping[str, Any], score: float | None) -> None:
    from opentelemetry.trace import StatusCode

    status = report.get("status")
    usage = report.get("usage") or {}
    attributes: dict[str, Any] = {
        "asynceval.status": status,
        "asynceval.termination_reason": report.get("termination_reason"),
        "asynceval.score": score,
        "asynceval.attempts": report.get("attempts"),
        "asynceval.llm_calls": usage.get("llm_calls"),
        "asynceval.retries": usage.get("retries"),
        n.INPUT_TOKENS: usage.get("prompt_tokens"),
        n.OUTPUT_TOKENS: usage.get("completion_tokens"),
        n.COST: usage.get("cost_usd"),
    }
    error = report.get("error")
    if isinstance(error, Mapping):
        attributes[n.ERROR_TYPE] = error.get("kind") or error.get("type")
    span.set_attributes({k: v for k, v in attributes.items() if _attribute_value(v)})
    for index, entry in enumerate(report.get("eval") or ()):
        event = evaluation_event(entry, index)
        if event is not None:
            span.add_event(n.EVALUATION_EVENT, event)
    if status != "success":
        span.set_status(StatusCode.ERROR, str(status))


def _attribute_value(value: object) -> bool:
    return isinstance(value, str | bool | int | float) and value == value  # no None, no NaN


def evaluation_event(entry: object, index: int) -> dict[str, Any] | None:
    """The `gen_ai.evaluation.result` event attributes of one evaluator entry: its name (`name`,
    `evaluator` or `dimension`, else `evaluator_{index}`), its score (a finite number `score`),
    its label (`passed`: pass or fail, else a string `label`), its explanation (`explanation`,
    `reason` or `argument`, cut at 1,000 characters) and an evaluator's error (`error.type`).
    None for an entry that says none of these (not a mapping)."""
    if not isinstance(entry, Mapping):
        return None
    name = next(
        (entry[k] for k in ("name", "evaluator", "dimension") if isinstance(entry.get(k), str)),
        f"evaluator_{index}",
    )
    event: dict[str, Any] = {n.EVALUATION_NAME: name}
    score = entry.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
        event[n.EVALUATION_SCORE] = float(score)
    passed = entry.get("passed")
    if isinstance(passed, bool):
        event[n.EVALUATION_LABEL] = "pass" if passed else "fail"
    elif isinstance(entry.get("label"), str):
        event[n.EVALUATION_LABEL] = entry["label"]
    for key in ("explanation", "reason", "argument"):
        if isinstance(entry.get(key), str):
            event[n.EVALUATION_EXPLANATION] = entry[key][:1000]
            break
    error = entry.get("error")
    if isinstance(error, Mapping):
        event[n.ERROR_TYPE] = str(error.get("type") or "error")
    return event


def _extracted(carrier: Mapping[str, str] | None) -> Context | None:
    """The parent context a carrier names (None: the current one)."""
    if not carrier:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(dict(carrier))
