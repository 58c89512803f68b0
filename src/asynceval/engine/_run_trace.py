"""A run's OpenTelemetry (`asynceval.telemetry`): decided once, when the run is built, then
bound for the run's whole context with its span `asynceval.run` current, so that its
repetitions' spans (and their calls') are its children and every call reads the run's decision
from one context variable. With telemetry off it binds None (calls then look no further) and
starts nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio.to_thread

from ..limits import ConcurrencyController
from ..telemetry import Telemetry, TracedBlock, current_telemetry
from ..telemetry import telemetry_scope as _scope


class RunTrace:
    """One run's telemetry (see the module); `telemetry` is None when it is off."""

    __slots__ = ("_span", "telemetry")

    def __init__(self) -> None:
        self.telemetry: Telemetry | None = current_telemetry()
        self._span: TracedBlock | None = None

    @contextmanager
    def scope(
        self, run_id: str, limiter: ConcurrencyController, attributes: Mapping[str, Any]
    ) -> Iterator[None]:
        """The run's block: its telemetry bound, its span current (with `attributes`), its
        limiter watched by the gauges."""
        telemetry = self.telemetry
        if telemetry is None:
            with _scope(None):
                yield
            return
        telemetry.watch_limiter(limiter)
        self._span = span = TracedBlock.run(telemetry, run_id, attributes)
        with _scope(telemetry), span:
            yield

    def finished(
        self,
        counts: Mapping[str, int],
        duration_s: float,
        interrupted: bool,
        cost: Mapping[str, Any],
    ) -> None:
        """What the run's span says at its end (its `run_finished` event's numbers)."""
        if self._span is not None:
            self._span.run_finished(counts, duration_s, interrupted, cost.get("cost_usd"))

    async def flush(self) -> None:
        """Send what the providers asynceval set up itself still hold (from a worker thread:
        the export blocks), so that a script's run is exported before it exits."""
        if self.telemetry is not None:
            from ..telemetry import flush_if_set_up  # loaded with its first use

            await anyio.to_thread.run_sync(flush_if_set_up)
