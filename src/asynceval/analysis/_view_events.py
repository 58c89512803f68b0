"""The events side of `asynceval view`: an events.jsonl reduced to what its charts need.

The log is read one line at a time (it may be hundreds of MB) and never kept: each run in it (a
`run_started` begins one, as in `logcheck`) keeps only compact arrays of its call events, which
are cut into at most `max_buckets` time buckets when the run ends. Per bucket: the most calls in
flight and the time-weighted mean, the lowest adaptive endpoint limit, the most calls queued,
queue-wait p50/p95/max of the calls acquired in it, and counts of retries, timeouts, failed
calls and finished repetitions. The replay follows `logcheck`'s rules: +1 per `acquired`, -1
per `released` of a call with one in flight (per call_id), a cluster run's events put in
timestamp order with a `released` first on a tie. Damaged lines are skipped and counted.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .summary import percentile

# Event kinds kept per run, as small integers in an array('b').
ACQ, REL, RETRY, TIMEOUT, LIMIT, QUEUED, FAILED, CANCELLED, FINISHED = range(1, 10)
_KINDS = {
    "acquired": ACQ,
    "released": REL,
    "retry": RETRY,
    "timeout": TIMEOUT,
    "limit_changed": LIMIT,
    "queueing": QUEUED,
    "llm_call_failed": FAILED,
    "cancelled": CANCELLED,
    "task_finished": FINISHED,
}
MIN_BUCKET_S = 0.001  # finer than the timestamps' jitter says nothing more
# Queue-wait histogram bin edges in seconds; the last bin is "this or more".
WAIT_EDGES = [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60]


def _epoch(stamp: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 timestamp, None when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@dataclass
class _Run:
    """One run's call events, kept compactly until the run ends."""

    started: dict[str, Any] | None
    limit: int | None
    times: array[float] = field(default_factory=lambda: array("d"))
    kinds: array[int] = field(default_factory=lambda: array("b"))
    values: array[float] = field(default_factory=lambda: array("d"))
    endpoints: dict[int, str] = field(default_factory=dict)  # a LIMIT event's (by position)
    in_flight: dict[str, int] = field(default_factory=dict)
    calls: set[str] = field(default_factory=set)
    workers: bool = False
    unbalanced: int = 0
    helds: list[float] = field(default_factory=list)
    retries_by_status: Counter[str] = field(default_factory=Counter)
    finished: dict[str, Any] | None = None
    first: float | None = None  # of any event of the run, not only call events
    last: float | None = None

    def add(self, event: dict[str, Any], kind: int, when: float) -> None:
        call_id = str(event.get("call_id"))
        value = math.nan
        if kind == ACQ:
            self.calls.add(call_id)
            self.in_flight[call_id] = self.in_flight.get(call_id, 0) + 1
            value = _number(event.get("wait_s")) or 0.0  # None: no wait on record
        elif kind == REL:
            # Balanced in file order: one call's events come from one process, in its order.
            if self.in_flight.get(call_id, 0) <= 0:
                self.unbalanced += 1
                return
            self.in_flight[call_id] -= 1
            if not self.in_flight[call_id]:
                del self.in_flight[call_id]
            held = _number(event.get("held_s"))
            if held is not None:
                self.helds.append(held)
        elif kind == RETRY:
            self.retries_by_status[str(event.get("status_code"))] += 1
        elif kind == QUEUED:
            value = _number(event.get("queue_depth")) or 0.0
        elif kind == LIMIT:
            limit = _number(event.get("limit"))
            value = math.nan if limit is None else limit
            self.endpoints[len(self.times)] = str(event.get("endpoint"))
        self.times.append(when)
        self.kinds.append(kind)
        self.values.append(value)


@dataclass
class EventsView:
    """What the page shows of an events file: `as_dict()` is embedded as JSON."""

    present: bool
    path: str
    events: int = 0
    damaged_lines: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)
    wait_counts: list[int] = field(default_factory=lambda: [0] * len(WAIT_EDGES))

    def as_dict(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "path": self.path,
            "events": self.events,
            "damaged_lines": self.damaged_lines,
            "runs": self.runs,
            "wait_histogram": {"edges": WAIT_EDGES, "counts": self.wait_counts},
        }


def read_events_view(
    path: Path, header_limits: list[int | None], max_buckets: int = 2000
) -> EventsView:
    """The charts' data of the events file at `path`. `header_limits` are the results file's
    limits, one per header (run), used for a run whose `run_started` gives none. A missing file
    gives `present=False` (the page says there is no chart); a line that is not a JSON event
    object is counted in `damaged_lines` and skipped. Raises OSError when it cannot be read."""
    view = EventsView(present=path.is_file(), path=str(path))
    if not view.present:
        return view
    run: _Run | None = None
    with open(path, "rb") as file:
        for line in file:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                view.damaged_lines += 1
                continue
            if not isinstance(event, dict) or not isinstance(event.get("event"), str):
                view.damaged_lines += 1
                continue
            view.events += 1
            run = _feed(view, run, event, header_limits, max_buckets)
    if run is not None:
        view.runs.append(_reduce(run, max_buckets, view.wait_counts))
    return view


def _feed(
    view: EventsView,
    run: _Run | None,
    event: dict[str, Any],
    header_limits: list[int | None],
    max_buckets: int,
) -> _Run:
    """Add one event to the current run (starting a new one on `run_started`); the run it is in."""
    name = event["event"]
    if name == "run_started" or run is None:
        if run is not None:
            view.runs.append(_reduce(run, max_buckets, view.wait_counts))
        index = len(view.runs)
        started = event if name == "run_started" else None
        limit = started.get("max_concurrent_llm_calls") if started else None
        if not isinstance(limit, int) or isinstance(limit, bool):
            fallback = header_limits[min(index, len(header_limits) - 1)] if header_limits else None
            limit = fallback
        run = _Run(started=started, limit=limit)
    if name == "run_finished":
        run.finished = event
    when = _epoch(event.get("timestamp"))
    if when is None:
        return run
    run.first = when if run.first is None else min(run.first, when)
    run.last = when if run.last is None else max(run.last, when)
    kind = _KINDS.get(name)
    if kind is not None:
        run.workers = run.workers or "worker" in event
        run.add(event, kind, when)
    return run


def _order(run: _Run) -> list[int]:
    """The order to replay a run's events in: the file's, or for a cluster run (its workers'
    lines arrive in any order) by timestamp, a `released` first on a tie."""
    indices = list(range(len(run.times)))
    if run.workers:
        indices.sort(key=lambda i: (run.times[i], run.kinds[i] != REL))
    return indices


def _reduce(run: _Run, max_buckets: int, wait_counts: list[int]) -> dict[str, Any]:
    """A run's per-bucket series and totals (see the module docstring)."""
    order = _order(run)
    started = run.started or {}
    t0 = run.first if run.first is not None else 0.0
    end = run.last if run.last is not None else t0
    span = max(end - t0, MIN_BUCKET_S)
    n = max(1, min(max_buckets, math.ceil(span / MIN_BUCKET_S)))
    series = _Buckets(n, span / n, t0)
    series.replay(run, order)
    waits = [run.values[i] for i in order if run.kinds[i] == ACQ]
    for wait in waits:
        wait_counts[_wait_bin(wait)] += 1
    stats = {
        "calls": len(run.calls),
        "max_in_flight": series.peak,
        "limit_held": run.limit is None or series.peak <= run.limit,
        "retries": sum(run.retries_by_status.values()),
        "retries_by_status": dict(sorted(run.retries_by_status.items())),
        "timeouts": sum(series.timeouts),
        "failed_calls": sum(series.failed),
        "cancelled": series.cancelled,
        "limit_changes": series.limit_changes,
        "lowest_endpoint_limit": series.lowest_limit,
        "still_in_flight": sum(run.in_flight.values()),
        "unbalanced_releases": run.unbalanced,
        "wait_p50_s": percentile(waits, 0.5),
        "wait_p95_s": percentile(waits, 0.95),
        "wait_p99_s": percentile(waits, 0.99),
        "wait_max_s": max(waits) if waits else None,
        "held_p50_s": percentile(run.helds, 0.5),
        "held_p95_s": percentile(run.helds, 0.95),
        "duration_s": round(end - t0, 6),
        "interrupted": (run.finished or {}).get("interrupted"),
    }
    return {
        "started_at": started.get("timestamp"),
        "benchmark": started.get("benchmark"),
        "limit": run.limit,
        "t0": t0,
        "bucket_s": span / n,
        "buckets": n,
        "stats": stats,
        **series.as_dict(),
    }


def _wait_bin(wait: float) -> int:
    index = 0
    for number, edge in enumerate(WAIT_EDGES):
        if wait >= edge:
            index = number
    return index


def _round(values: list[float], digits: int) -> list[float | None]:
    return [None if math.isnan(v) else round(v, digits) for v in values]


class _Buckets:
    """The per-bucket series of one run, filled by one replay of its events in order."""

    def __init__(self, n: int, width: float, t0: float) -> None:
        self.n, self.width, self.t0 = n, width, t0
        self.max_in_flight = [0] * n
        self.area = [0.0] * n  # calls in flight x seconds, for the time-weighted mean
        self.queued = [0] * n
        self.retries = [0] * n
        self.timeouts = [0] * n
        self.failed = [0] * n
        self.finished = [0] * n
        self.adaptive = [math.nan] * n
        self.waits: list[list[float]] = [[] for _ in range(n)]
        self.current = self.peak = self.cancelled = self.limit_changes = 0
        self.lowest_limit: int | None = None
        self.endpoint_limits: dict[str, float] = {}
        self.clock = t0

    def bucket(self, when: float) -> int:
        return min(self.n - 1, max(0, int((when - self.t0) / self.width)))

    def advance(self, when: float) -> None:
        """Carry the current state from the clock up to `when` through every bucket between:
        what is in flight when a bucket begins counts towards its max and mean."""
        when = max(when, self.clock)  # a timestamp that steps back is taken as "no later"
        adaptive = min(self.endpoint_limits.values()) if self.endpoint_limits else math.nan
        for index in range(self.bucket(self.clock), self.bucket(when) + 1):
            start = max(self.clock, self.t0 + index * self.width)
            stop = min(when, self.t0 + (index + 1) * self.width)
            self.area[index] += self.current * max(0.0, stop - start)
            self.max_in_flight[index] = max(self.max_in_flight[index], self.current)
            if not math.isnan(adaptive):
                held = self.adaptive[index]
                self.adaptive[index] = adaptive if math.isnan(held) else min(held, adaptive)
        self.clock = when

    def replay(self, run: _Run, order: list[int]) -> None:
        for i in order:
            when, kind, value = run.times[i], run.kinds[i], run.values[i]
            self.advance(when)
            index = self.bucket(self.clock)
            if kind == ACQ:
                self.current += 1
                self.peak = max(self.peak, self.current)
                self.max_in_flight[index] = max(self.max_in_flight[index], self.current)
                self.waits[index].append(value)
            elif kind == REL:
                self.current -= 1
            elif kind == QUEUED:
                self.queued[index] = max(self.queued[index], int(value))
            elif kind == LIMIT:
                self._limit_changed(run.endpoints[i], value, index)
            else:
                self._count(kind, index)
        self.advance(self.t0 + self.n * self.width)

    def _limit_changed(self, endpoint: str, value: float, index: int) -> None:
        self.limit_changes += 1
        if math.isnan(value):
            return
        self.endpoint_limits[endpoint] = value
        low = int(value) if self.lowest_limit is None else min(self.lowest_limit, int(value))
        self.lowest_limit = low
        held = self.adaptive[index]
        self.adaptive[index] = value if math.isnan(held) else min(held, value)

    def _count(self, kind: int, index: int) -> None:
        if kind == RETRY:
            self.retries[index] += 1
        elif kind == TIMEOUT:
            self.timeouts[index] += 1
        elif kind == FAILED:
            self.failed[index] += 1
        elif kind == FINISHED:
            self.finished[index] += 1
        elif kind == CANCELLED:
            self.cancelled += 1

    def as_dict(self) -> dict[str, Any]:
        p50 = [percentile(w, 0.5) if w else math.nan for w in self.waits]
        p95 = [percentile(w, 0.95) if w else math.nan for w in self.waits]
        top = [max(w) if w else math.nan for w in self.waits]
        adaptive = None if self.lowest_limit is None else _round(self.adaptive, 0)
        return {
            "max_in_flight": self.max_in_flight,
            "mean_in_flight": [round(a / self.width, 3) for a in self.area],
            "queued_max": self.queued,
            "acquired": [len(w) for w in self.waits],
            "wait_p50": _round([math.nan if v is None else v for v in p50], 6),
            "wait_p95": _round([math.nan if v is None else v for v in p95], 6),
            "wait_max": _round(top, 6),
            "retries": self.retries,
            "timeouts": self.timeouts,
            "failed": self.failed,
            "finished": self.finished,
            "adaptive_limit": adaptive,
        }
