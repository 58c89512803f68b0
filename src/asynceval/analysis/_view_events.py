"""The events side of `asynceval view`: an events.jsonl reduced to what its charts need, and
what `asynceval logs check` says of it.

The log is read one line at a time and never kept. Each run in it (a `run_started` begins one)
is replayed by `logcheck.RunReplay`, the replay of `logs check` itself, so every figure that
gives (calls, max in flight, whether the limit and the adaptive limits held, retries by status,
timeouts, failed calls, queue waits and slot holds, unresolved 429s) is its figure and the
page's verdict is its verdict (`logcheck.combine`). On top of it each event the charts use is
kept in 21 bytes (time, kind, a value, the calls in flight after it as the replay counts them)
until its run ends, when they are cut into at most `max_buckets` time buckets: per bucket the
most calls in flight and the time-weighted mean, the lowest adaptive endpoint limit, the most
calls queued, queue-wait p50/p95/max of the calls acquired in it, and counts of acquisitions,
retries, timeouts, failed calls and finished repetitions. An event without a usable timestamp
(ISO 8601 text, or seconds since the epoch) stays in the replay, is counted, and is charted at
the last known time of its run. A cluster run (a `worker` on its events: they reach the file in
arrival order) is replayed in time order, as logs check does: its lines are read again when it
ends and sorted. A line that is not a JSON object with an `event` is skipped and counted in
`damaged_lines` (logs check refuses such a file whole).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..engine.results import json_lines
from .logcheck import RunReplay, combine, in_time_order, is_cluster_event
from .summary import finite_number, percentile

# Event kinds kept per run, as small integers in an array('b').
ACQ, REL, RETRY, TIMEOUT, LIMIT, QUEUED, FAILED, FINISHED = range(1, 9)
_KINDS = {
    "acquired": ACQ,
    "released": REL,
    "retry": RETRY,
    "timeout": TIMEOUT,
    "limit_changed": LIMIT,
    "queueing": QUEUED,
    "llm_call_failed": FAILED,
    "task_finished": FINISHED,
}
MIN_BUCKET_S = 0.001  # finer than the timestamps' jitter says nothing more
# Queue-wait histogram bin edges in seconds; the last bin is "this or more".
WAIT_EDGES = [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60]
# What a cluster run's events keep while they wait to be sorted: what the replay and the
# charts read of them.
_KEPT = {"event", "timestamp", "worker", "call_id", "wait_s", "held_s", "status_code", "run_id"}
_KEPT |= {"task_id", "repeat_idx", "limit", "cap", "endpoint", "queue_depth", "counts"}
_KEPT |= {"max_concurrent_llm_calls", "skipped_as_done"}
# Of `logs check`'s findings on the whole log, what the page shows beside each run's own.
_VERDICT = ("events", "calls", "max_in_flight", "limit", "limit_held")


def epoch(stamp: Any) -> float | None:
    """Seconds since the epoch of a timestamp (ISO 8601 text or a number), None when it is
    neither."""
    if type(stamp) is str:
        try:
            return datetime.fromisoformat(stamp).timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    number = finite_number(stamp)
    return None if number is None else float(number)


class _Run:
    """One run of the log: its replay, and its charted events kept compactly until it ends."""

    def __init__(self, start: int, cluster: bool = False) -> None:
        self.replay = RunReplay()
        self.start = start  # its lines' byte range, read again if it is a cluster run's
        self.stop: int | None = None
        self.cluster = cluster
        self.started: dict[str, Any] | None = None  # its run_started
        self.finished: dict[str, Any] | None = None  # its run_finished
        self.run_id: str | None = None
        self.events = self.untimed = self.task_finished = 0
        self.times: array[float] = array("d")  # the last usable time so far; NaN: none yet
        self.kinds: array[int] = array("b")
        self.values: array[float] = array("d")  # a wait, a queue depth, a limit; NaN: none
        self.levels: array[int] = array("i")  # calls in flight after the event
        self.endpoints: dict[int, str] = {}  # a LIMIT event's endpoint, by position
        self.first: float | None = None  # the earliest and latest usable time, of any event
        self.last: float | None = None
        self.known = math.nan  # the last usable time, in replay order

    def add(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        if not self.events and name == "run_started":
            self.started = event
        self.events += 1
        if self.run_id is None and isinstance(event.get("run_id"), str):
            self.run_id = event["run_id"]
        waits = len(self.replay.waits)
        self.replay.feed(event)
        if name == "run_finished":
            self.finished = event
        when = epoch(event.get("timestamp"))
        if when is None:
            self.untimed += 1
        else:
            if self.first is None or when < self.first:
                self.first = when
            if self.last is None or when > self.last:
                self.last = when
            self.known = when
        kind = _KINDS.get(name) if isinstance(name, str) else None
        if kind is None:
            return
        self.task_finished += kind == FINISHED
        value = math.nan
        if kind == ACQ and len(self.replay.waits) > waits:
            value = self.replay.waits[-1]
        elif kind == QUEUED:
            value = float(finite_number(event.get("queue_depth")) or 0)
        elif kind == LIMIT:
            limit = finite_number(event.get("limit"))
            value = math.nan if limit is None else float(limit)
            self.endpoints[len(self.kinds)] = str(event.get("endpoint"))
        self.times.append(self.known)  # NaN until a time is known: the run's first, later
        self.kinds.append(kind)
        self.values.append(value)
        self.levels.append(self.replay.in_flight)


@dataclass
class EventsView:
    """What the page shows of an events file: `as_dict()` is embedded as JSON."""

    present: bool
    path: str
    damaged_lines: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)
    replays: list[RunReplay] = field(default_factory=list)
    wait_counts: list[int] = field(default_factory=lambda: [0] * len(WAIT_EDGES))

    def check(self) -> dict[str, Any]:
        """What `asynceval logs check` says of the whole log, as far as the page shows it."""
        check = combine(self.replays)
        found = {name: getattr(check, name) for name in _VERDICT}
        found["unresolved_429"] = len(check.unresolved_429)
        return {**found, "ok": check.ok, "checkable": check.checkable}

    def as_dict(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "path": self.path,
            "damaged_lines": self.damaged_lines,
            "check": self.check() if self.present else None,
            "runs": self.runs,
            "wait_histogram": {"edges": WAIT_EDGES, "counts": self.wait_counts},
        }


def read_events_view(
    path: Path, headers: list[dict[str, Any]], max_buckets: int = 2000
) -> EventsView:
    """The charts' data of the events file at `path`, and its `logs check` figures. `headers`
    are the results file's header lines, one per run: a run in the log takes the one with its
    run_id (by position when either has none) for the limit its run_started does not give. A
    missing file gives `present=False` (the page says there is no chart). Raises OSError when
    it cannot be read."""
    view = EventsView(present=path.is_file(), path=str(path))
    if not view.present:
        return view
    run: _Run | None = None
    seen = 0  # events of the current run so far
    for _, offset, event in json_lines(path):
        if not isinstance(event, dict) or "event" not in event:
            view.damaged_lines += 1
            continue
        if run is None or (event.get("event") == "run_started" and seen):
            if run is not None:
                run.stop = offset
                _close(view, run, path, headers, max_buckets)
            run, seen = _Run(offset), 0
        seen += 1
        if not run.cluster and is_cluster_event(event, first=seen == 1):
            run = _Run(run.start, cluster=True)  # read again, in time order, when it ends
        if not run.cluster:
            run.add(event)
    if run is not None:
        _close(view, run, path, headers, max_buckets)
    return view


def _close(
    view: EventsView, run: _Run, path: Path, headers: list[dict[str, Any]], max_buckets: int
) -> None:
    """End a run: a cluster run's lines read again and replayed in time order; its charts."""
    if run.cluster:
        events = [
            {key: value for key, value in event.items() if key in _KEPT}
            for _, _, event in json_lines(path, run.start, run.stop)
            if isinstance(event, dict) and "event" in event
        ]
        run = _Run(run.start, cluster=True)
        for event in in_time_order(events):
            run.add(event)
    view.replays.append(run.replay)
    view.runs.append(_reduce(run, len(view.runs), headers, max_buckets, view.wait_counts))


def _header_of(run: _Run, index: int, headers: list[dict[str, Any]]) -> int | None:
    """The results header of the `index`-th run in the log: the one with its run_id, or when
    the run or the headers have none, the one in the same place."""
    ids = [header.get("run_id") for header in headers]
    if run.run_id is not None and any(isinstance(i, str) for i in ids):
        return ids.index(run.run_id) if run.run_id in ids else None
    return index if index < len(headers) else None


def _filled(run: _Run) -> array[float]:
    """The run's charted events' times: those before any known time at its first."""
    times = run.times
    if times and math.isnan(times[0]):
        times = array("d", times)
        first = run.first if run.first is not None else 0.0
        for i, when in enumerate(times):
            if not math.isnan(when):
                break
            times[i] = first
    return times


def _reduce(
    run: _Run, index: int, headers: list[dict[str, Any]], max_buckets: int, wait_counts: list[int]
) -> dict[str, Any]:
    """A run's per-bucket series, and its figures (its replay's) for the page."""
    check = run.replay.finish()
    t0 = run.first if run.first is not None else 0.0
    end = run.last if run.last is not None else t0
    span = max(end - t0, MIN_BUCKET_S)
    n = max(1, min(max_buckets, math.ceil(span / MIN_BUCKET_S)))
    series = _Buckets(n, span / n, t0)
    series.replay(run, _filled(run))
    waits = [wait for wait in run.replay.waits if not math.isnan(wait)]
    for wait in waits:
        wait_counts[max(0, bisect_right(WAIT_EDGES, wait) - 1)] += 1
    header = _header_of(run, index, headers)
    header_limit = None if header is None else headers[header].get("max_concurrent_llm_calls")
    finished = run.finished or {}
    counts = finished.get("counts")
    ran = sum(v for v in counts.values() if finite_number(v)) if isinstance(counts, dict) else None
    stats = {
        "events": run.events,
        "untimed": run.untimed,
        "calls": check.calls,
        "max_in_flight": check.max_in_flight,
        "limit_held": check.limit_held,
        "adaptive_held": run.replay.adaptive_held,
        "retries": check.retries,
        "retries_by_status": dict(sorted(check.retries_by_status.items())),
        "timeouts": check.timeouts,
        "failed_calls": check.failed_calls,
        "unresolved_429": len(check.unresolved_429),
        "limit_changes": check.limit_changes,
        "lowest_endpoint_limit": check.lowest_endpoint_limit,
        "still_in_flight": run.replay.in_flight,
        "wait_p50_s": check.queue_wait_p50_s,
        "wait_p95_s": check.queue_wait_p95_s,
        "wait_max_s": max(waits) if waits else None,
        "held_p50_s": check.held_p50_s,
        "held_p95_s": check.held_p95_s,
        "duration_s": round(end - t0, 6),
        "finished": run.finished is not None,
        "repetitions": run.task_finished if ran is None else ran,
        "skipped_as_done": finite_number(finished.get("skipped_as_done")),
    }
    return {
        "started_at": (run.started or {}).get("timestamp"),
        "limit": run.replay.limit,
        "header": header,
        "header_limit": finite_number(header_limit),
        "cluster": run.cluster,
        "bucket_s": span / n,
        "buckets": n,
        "stats": stats,
        **series.as_dict(),
    }


def _round(values: list[float], digits: int) -> list[float | None]:
    return [None if math.isnan(v) else round(v, digits) for v in values]


class _Buckets:
    """The per-bucket series of one run, filled by one pass over its kept events in replay
    order; the calls in flight are the replay's count after each event."""

    def __init__(self, n: int, width: float, t0: float) -> None:
        self.n, self.width, self.t0 = n, width, t0
        self.max_in_flight = [0] * n
        self.area = [0.0] * n  # calls in flight x seconds, for the time-weighted mean
        self.queued = [0] * n
        self.acquired = [0] * n
        self.counts = {kind: [0] * n for kind in (RETRY, TIMEOUT, FAILED, FINISHED)}
        self.adaptive = [math.nan] * n
        self.waits: list[list[float]] = [[] for _ in range(n)]
        self.current = 0
        self.endpoint_limits: dict[str, float] = {}
        self.clock = t0

    def bucket(self, when: float) -> int:
        return min(self.n - 1, max(0, int((when - self.t0) / self.width)))

    def advance(self, when: float) -> None:
        """Carry the current state from the clock up to `when` through every bucket between:
        what is in flight when a bucket begins counts towards its max and mean."""
        if when <= self.clock:  # no time passes (a timestamp that steps back: no later)
            return
        first, last = self.bucket(self.clock), self.bucket(when)
        if first == last:  # within one bucket, whose max already holds what is in flight
            self.area[first] += self.current * (when - self.clock)
            self.clock = when
            return
        adaptive = min(self.endpoint_limits.values()) if self.endpoint_limits else math.nan
        for index in range(first, last + 1):
            start = max(self.clock, self.t0 + index * self.width)
            stop = min(when, self.t0 + (index + 1) * self.width)
            self.area[index] += self.current * max(0.0, stop - start)
            self.max_in_flight[index] = max(self.max_in_flight[index], self.current)
            if not math.isnan(adaptive):
                held = self.adaptive[index]
                self.adaptive[index] = adaptive if math.isnan(held) else min(held, adaptive)
        self.clock = when

    def replay(self, run: _Run, times: array[float]) -> None:
        for i, kind in enumerate(run.kinds):
            self.advance(times[i])
            index = self.bucket(self.clock)
            self.current = run.levels[i]
            value = run.values[i]
            if kind == ACQ:
                self.max_in_flight[index] = max(self.max_in_flight[index], self.current)
                self.acquired[index] += 1
                if not math.isnan(value):
                    self.waits[index].append(value)
            elif kind == QUEUED:
                self.queued[index] = max(self.queued[index], int(value))
            elif kind == LIMIT and not math.isnan(value):
                self.endpoint_limits[run.endpoints[i]] = value
                held = self.adaptive[index]
                self.adaptive[index] = value if math.isnan(held) else min(held, value)
            elif kind in self.counts:
                self.counts[kind][index] += 1
        self.advance(self.t0 + self.n * self.width)

    def as_dict(self) -> dict[str, Any]:
        p50 = [percentile(w, 0.5) if w else None for w in self.waits]
        p95 = [percentile(w, 0.95) if w else None for w in self.waits]
        top = [max(w) if w else math.nan for w in self.waits]
        adaptive = None if not self.endpoint_limits else _round(self.adaptive, 0)
        return {
            "max_in_flight": self.max_in_flight,
            "mean_in_flight": [round(a / self.width, 3) for a in self.area],
            "queued_max": self.queued,
            "acquired": self.acquired,
            "wait_p50": _round([math.nan if v is None else v for v in p50], 6),
            "wait_p95": _round([math.nan if v is None else v for v in p95], 6),
            "wait_max": _round(top, 6),
            "retries": self.counts[RETRY],
            "timeouts": self.counts[TIMEOUT],
            "failed": self.counts[FAILED],
            "finished": self.counts[FINISHED],
            "adaptive_limit": adaptive,
        }
