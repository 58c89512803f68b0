"""Checking an event log: did the concurrency limit hold, was every 429 resolved, and did a
run with a cost budget spend no more than it (the sum of its `released` events' `cost_usd`, and
its provider batches' `batch_completed` ones)? The budget is the run directory's: a resumed
segment is judged by what every segment of its run spent up to its end (see `._spend`).

The check replays the log in order: +1 per `acquired`, -1 per `released`, per call_id, so the
maximum is the true number of calls in flight (SC-002). An endpoint's adaptive limit
(`limit_changed`) must stay within the run's cap and report that cap: the limit read at the
start never changes during a run (FR-009). A 429 counts as unresolved when its call
never succeeded afterwards and no `llm_call_failed` recorded its end (SC-001).

The verdict covers the calls that went through the funnel, the only ones with events: a run
whose log holds `funnel_bypassed` (SDK clients sending around the funnel) is counted in
`bypassed_clients`, and the verdict says it covers only the funnel's calls. Calls that were an
SDK's own retries (their events carry `sdk_retry`) are counted in `sdk_retry_calls`.

Calls of the batch lane (LLM_LANE=batch) went into provider batches (`batch_submitted` names
each batch's call_ids): they held no slot (a batch's creation holds one, with its own call_id),
so they are counted apart, in `batch_calls` (and `batches`), with the calls answered without a
slot. A resumed run's calls answered from batches an earlier segment left open
(`batch_reattached`, found) count there too when the log does not hold the run that sent those
lines (each line is counted once), their batches in `batches_reattached`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from os import PathLike
from typing import Any

from ..errors import LogFormatError as LogFormatError
from ._spend import Spend, directory_verdicts
from .summary import percentile


@dataclass
class LogCheck:
    """What an event log shows about the limit and the retries (see `check_events`)."""

    events: int = 0
    calls: int = 0
    max_in_flight: int = 0
    limit: int | None = None
    limit_held: bool = True
    unresolved_429: list[str] = field(default_factory=list)
    retries: int = 0
    retries_by_status: dict[str, int] = field(default_factory=dict)
    timeouts: int = 0
    failed_calls: int = 0
    queue_wait_p50_s: float | None = None
    queue_wait_p95_s: float | None = None
    held_p50_s: float | None = None
    held_p95_s: float | None = None
    unbalanced: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    limit_changes: int = 0
    lowest_endpoint_limit: int | None = None
    cache_hits: int = 0  # calls answered from the model-call cache: they held no slot
    journal_hits: int = 0  # calls of a resumed run answered from its call journal: no slot
    batch_calls: int = 0  # calls sent in provider batches (batch lane): no slot of their own
    batches: int = 0  # provider batches created (batch_submitted)
    batches_reattached: int = 0  # batches a resumed run took over (batch_reattached)
    bypassed_clients: int = 0  # SDK clients seen sending around the funnel (funnel_bypassed)
    sdk_retry_calls: int = 0  # calls that were an SDK's own retry of a call the funnel retried
    cost_usd: float | None = None  # the sum of the released events' cost_usd (None: no cost)
    budget_held: bool = True  # no run with a budget spent more than it

    @property
    def funnel_only(self) -> bool:
        """Whether the verdict covers only some of the calls: SDK clients of a run sent around
        the funnel, and those calls left no event to check."""
        return self.bypassed_clients > 0

    @property
    def answered_without_slot(self) -> int:
        """Calls answered from the cache or the journal (they took no slot, sent nothing) or
        sent in provider batches (no slot of their own)."""
        return self.cache_hits + self.journal_hits + self.batch_calls

    @property
    def cannot_check(self) -> str | None:
        """Why nothing can be said of the limit, or None when it can: no call events at all
        (calls made around the funnel, or a log filtered above INFO), or calls in a run whose
        limit is unknown (no `run_started` header and no --limit)."""
        if not self.calls and not self.answered_without_slot:
            return (
                "no call events in this log (calls made outside the funnel, or a log filtered "
                "above INFO)"
            )
        if any(run["limit"] is None and run["calls"] for run in self.runs):
            return "no run header (run_started) says the limit: pass --limit"
        return None

    @property
    def checkable(self) -> bool:
        """Whether the limit can be checked (see `cannot_check`); a run answered wholly from
        the cache or the journal is: none of its calls held a slot."""
        return self.cannot_check is None

    @property
    def ok(self) -> bool:
        return self.checkable and self.limit_held and not self.unresolved_429 and self.budget_held

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "answered_without_slot": self.answered_without_slot,
            "checkable": self.checkable,
            "cannot_check": self.cannot_check,
            "funnel_only": self.funnel_only,
            "ok": self.ok,
        }


def read_events(path: str | PathLike[str]) -> list[dict[str, Any]]:
    """Every event of a JSON-lines log; a line that is not a JSON object is a LogFormatError."""
    events: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LogFormatError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(event, dict) or "event" not in event:
                raise LogFormatError(f"{path}:{number}: not an event object")
            events.append(event)
    return events


def check_events(events: Iterable[dict[str, Any]], limit: int | None = None) -> LogCheck:
    """Replay events in order, each run on its own: a `run_started` begins a run, checked against
    its own limit (`limit`, when given, for every run) with nothing in flight carried over from
    the run before (a killed run's calls never released).

    A call that got a 429 is followed per call_id: an attempt that ends (`released`) with no
    `retry` after it succeeded, which resolves the 429; `llm_call_failed` resolves it too (the
    failure is on record), and so does the end of the call's repetition (`task_finished` or
    `task_retry` for its task_id and repeat_idx: it timed out or was re-run while the call slept
    out the 429). Anything else left at the end of a run is unresolved.
    """
    replays = []
    for run in _runs(events):
        replay = RunReplay(limit)
        for event in in_time_order(run):
            replay.feed(event)
        replay.finish()
        replays.append(replay)
    return combine(replays, limit)


def _runs(events: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The log cut into runs: each `run_started` begins one (events before the first are one)."""
    run: list[dict[str, Any]] = []
    for event in events:
        if event.get("event") == "run_started" and run:
            yield run
            run = []
        run.append(event)
    if run:
        yield run


def in_time_order(run: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's events in the order they happened. One process writes them in that order; a
    cluster run's workers' events reach the caller's file in arrival order, which can put one
    worker's `acquired` before the `released` on another worker that made room for it, so those
    are ordered by their timestamps (the workers' clocks; on one machine, one clock), a
    `released` first on a tie."""
    if not any(is_cluster_event(event, first=False) for event in run[1:]):
        return run
    head, rest = run[:1], run[1:]
    return head + sorted(
        rest, key=lambda e: (str(e.get("timestamp", "")), e.get("event") != "released")
    )


class _Replay:
    """One run's replay: calls in flight, 429s awaiting their outcome, waits and holds."""

    def __init__(
        self,
        check: LogCheck,
        limit: int | None,
        first: dict[str, Any],
        waits: list[float],
        helds: list[float],
    ) -> None:
        self.check = check
        self.limit = limit
        if limit is None and first.get("event") == "run_started":
            value = first.get("max_concurrent_llm_calls")
            self.limit = value if isinstance(value, int) else None
        self.in_flight: dict[str, int] = {}
        self.current = self.max_in_flight = 0
        self.after_429: dict[str, str] = {}  # call_id -> "pending" | "attempt_ended"
        self.task_of: dict[str, tuple[Any, Any]] = {}  # call_id -> (task_id, repeat_idx)
        self.calls: set[str] = set()
        self.sdk_retries: set[str] = set()  # calls that were an SDK's own retry
        self.batch_calls: set[str] = set()  # calls sent in provider batches
        self.submitted: set[str] = set()  # ids of the batches this run created
        self.reattached: dict[str, int] = {}  # batch id -> lines, of batches taken over
        self.bypassed = 0  # SDK clients the run's funnel_bypassed counted
        self.adaptive_held = True  # every adaptive limit stayed within the run's cap
        self.waits = waits
        self.helds = helds
        self.spend = Spend(first)

    def feed(self, event: dict[str, Any]) -> None:
        check = self.check
        check.events += 1
        name = event.get("event")
        call_id = str(event.get("call_id"))
        if name == "acquired":
            self._acquired(call_id, event)
        elif name == "released":
            self._released(call_id, event)
            self.spend.released(event)
        elif name == "retry":
            check.retries += 1
            status = event.get("status_code")
            cause = _retry_cause(status, event.get("error"))
            check.retries_by_status[cause] = check.retries_by_status.get(cause, 0) + 1
            if status == 429 or call_id in self.after_429:
                self.after_429[call_id] = "pending"
                self.task_of[call_id] = (event.get("task_id"), event.get("repeat_idx"))
        elif name == "timeout":
            check.timeouts += 1
        elif name == "run_finished":
            self.spend.finished(event)
        elif name == "cache_hit":
            check.cache_hits += 1
        elif name == "journal_hit":
            check.journal_hits += 1
        elif name == "batch_submitted":
            check.batches += 1
            self.submitted.add(str(event.get("batch_id")))
            ids = event.get("call_ids")
            if isinstance(ids, list):
                self.batch_calls.update(str(i) for i in ids if i)
        elif name == "batch_reattached":
            requests, batch_id = event.get("requests"), event.get("batch_id")
            if event.get("found") != "not_found" and isinstance(requests, int):
                check.batches_reattached += 1
                self.reattached[str(batch_id)] = requests
        elif name == "batch_completed":
            self.spend.batch_completed(event)
        elif name == "limit_changed":
            self._limit_changed(event)
        elif name == "funnel_bypassed":
            count = event.get("count")
            self.bypassed = max(self.bypassed, count if isinstance(count, int) else 1)
        elif name == "llm_call_failed":
            check.failed_calls += 1
            self.after_429.pop(call_id, None)
        elif name in ("task_finished", "task_retry"):
            ended = (event.get("task_id"), event.get("repeat_idx"))
            for call in [c for c, task in self.task_of.items() if task == ended]:
                self.after_429.pop(call, None)  # its repetition ended while it waited
                del self.task_of[call]

    def _limit_changed(self, event: dict[str, Any]) -> None:
        """An endpoint's adaptive limit moved: it must stay within the cap the run started
        with, and that cap must be the one it reports (the limit never changes in a run)."""
        check = self.check
        check.limit_changes += 1
        value, cap = event.get("limit"), event.get("cap")
        if isinstance(value, int):
            lowest = check.lowest_endpoint_limit
            check.lowest_endpoint_limit = value if lowest is None else min(lowest, value)
        if self.limit is not None and (
            not isinstance(value, int) or value > self.limit or cap != self.limit
        ):
            self.adaptive_held = False

    def _acquired(self, call_id: str, event: dict[str, Any]) -> None:
        self.calls.add(call_id)
        if event.get("sdk_retry"):
            self.sdk_retries.add(call_id)
        self.in_flight[call_id] = self.in_flight.get(call_id, 0) + 1
        self.current += 1
        self.max_in_flight = max(self.max_in_flight, self.current)
        if isinstance(event.get("wait_s"), int | float):
            self.waits.append(float(event["wait_s"]))

    def _released(self, call_id: str, event: dict[str, Any]) -> None:
        if self.in_flight.get(call_id, 0) <= 0:
            self.check.unbalanced.append(call_id)
        else:
            self.in_flight[call_id] -= 1
            self.current -= 1
        if isinstance(event.get("held_s"), int | float):
            self.helds.append(float(event["held_s"]))
        if call_id in self.after_429:
            self.after_429[call_id] = "attempt_ended"  # a success, unless a retry follows

    def finish(self) -> None:
        check = self.check
        held = self.adaptive_held and (self.limit is None or self.max_in_flight <= self.limit)
        check.runs.append(
            {
                "limit": self.limit,
                "calls": len(self.calls),
                "max_in_flight": self.max_in_flight,
                "limit_held": held,
                "funnel_bypassed": self.bypassed,
                **self.spend.fields(),
            }
        )
        check.cost_usd = self.spend.fields()["cost_usd"]
        check.budget_held = self.spend.held
        check.bypassed_clients += self.bypassed
        check.sdk_retry_calls += len(self.sdk_retries)
        check.batch_calls += len(self.batch_calls)
        check.unresolved_429 += [c for c, state in self.after_429.items() if state == "pending"]
        check.calls += len(self.calls)
        check.max_in_flight = max(check.max_in_flight, self.max_in_flight)
        if self.limit is not None:
            check.limit = self.limit  # the last run's, as the summary line shows it
        check.unbalanced += [c for c, n in self.in_flight.items() if n > 0]


def is_cluster_event(event: dict[str, Any], first: bool) -> bool:
    """Whether `event` makes its run a cluster run, replayed in time order: a `worker` on any
    event but the run's first (see `in_time_order`)."""
    return not first and "worker" in event


class RunReplay:
    """One run of a log replayed as `check_events` replays it, fed one event at a time in replay
    order (a cluster run's events through `in_time_order` first), so that a caller can follow
    the replay without holding the log: `check` holds this run's figures alone (its `runs` one
    entry once `finish` is called), `waits` and `helds` its queue waits and slot holds, and
    `in_flight` the calls in flight after the last event fed. `combine` makes the whole log's
    `LogCheck` of several, the same as `check_events` gives."""

    def __init__(self, limit: int | None = None) -> None:
        self.check = LogCheck(limit=limit)
        self.waits: list[float] = []
        self.helds: list[float] = []
        self._limit = limit
        self._replay: _Replay | None = None

    def feed(self, event: dict[str, Any]) -> None:
        if self._replay is None:  # the run's first event: its run_started gives the limit
            self._replay = _Replay(self.check, self._limit, event, self.waits, self.helds)
        self._replay.feed(event)

    @property
    def in_flight(self) -> int:
        return 0 if self._replay is None else self._replay.current

    @property
    def limit(self) -> int | None:
        """The limit this run is checked against (its run_started's, or the one given)."""
        return self._limit if self._replay is None else self._replay.limit

    @property
    def submitted(self) -> set[str]:
        """The ids of the batches this run created."""
        return set() if self._replay is None else self._replay.submitted

    @property
    def reattached(self) -> dict[str, int]:
        """The batches this run took over from an earlier one: their ids and lines."""
        return {} if self._replay is None else self._replay.reattached

    @property
    def adaptive_held(self) -> bool:
        """Whether every adaptive endpoint limit stayed within the run's cap (so far)."""
        return self._replay is None or self._replay.adaptive_held

    def finish(self) -> LogCheck:
        """End the run (its calls still in flight count as unbalanced); its `LogCheck`."""
        if self._replay is not None:
            self._replay.finish()
        _conclude(self.check, self.waits, self.helds)
        return self.check


def combine(replays: Iterable[RunReplay], limit: int | None = None) -> LogCheck:
    """The `LogCheck` that `check_events(events, limit)` gives of a log whose runs, in order,
    were replayed (with `limit`) and finished as `replays`."""
    total = LogCheck(limit=limit)
    waits: list[float] = []
    helds: list[float] = []
    submitted: set[str] = set()
    reattached: dict[str, int] = {}
    for replay in replays:
        submitted |= replay.submitted
        reattached.update(replay.reattached)
        check = replay.check
        total.events += check.events
        total.calls += check.calls
        total.max_in_flight = max(total.max_in_flight, check.max_in_flight)
        if check.runs and check.runs[-1]["limit"] is not None:
            total.limit = check.runs[-1]["limit"]
        total.unresolved_429 += check.unresolved_429
        total.retries += check.retries
        for status, count in check.retries_by_status.items():
            total.retries_by_status[status] = total.retries_by_status.get(status, 0) + count
        total.timeouts += check.timeouts
        total.cache_hits += check.cache_hits
        total.journal_hits += check.journal_hits
        total.batch_calls += check.batch_calls
        total.batches_reattached += check.batches_reattached
        total.batches += check.batches
        total.bypassed_clients += check.bypassed_clients
        total.sdk_retry_calls += check.sdk_retry_calls
        if check.cost_usd is not None:  # each run's exact sum, added as it was written
            total.cost_usd = check.cost_usd + (total.cost_usd or 0.0)
        total.budget_held = total.budget_held and check.budget_held
        total.failed_calls += check.failed_calls
        total.unbalanced += check.unbalanced
        total.runs += check.runs
        total.limit_changes += check.limit_changes
        if check.lowest_endpoint_limit is not None:
            lowest = total.lowest_endpoint_limit
            low = check.lowest_endpoint_limit
            total.lowest_endpoint_limit = low if lowest is None else min(lowest, low)
        waits += replay.waits
        helds += replay.helds
    directory_verdicts(total.runs)  # the budget is the run directory's, over its segments
    total.budget_held = all(run["budget_held"] for run in total.runs)
    _conclude(total, waits, helds)
    # Lines of a batch taken over answer the resumed calls: counted once, with the run that
    # sent them when this log holds it, else here.
    total.batch_calls += sum(n for batch, n in reattached.items() if batch not in submitted)
    return total


def _conclude(check: LogCheck, waits: list[float], helds: list[float]) -> None:
    """What `check_events` works out once every run is replayed."""
    check.limit_held = all(run["limit_held"] for run in check.runs)
    check.queue_wait_p50_s = percentile(waits, 0.5)
    check.queue_wait_p95_s = percentile(waits, 0.95)
    check.held_p50_s = percentile(helds, 0.5)
    check.held_p95_s = percentile(helds, 0.95)


def _retry_cause(status: object, error: object) -> str:
    """A retry's HTTP status, else its cause: expired (a batch line left undone), timeout, connection."""
    if status is not None:
        return str(status)
    if "the batch ended before this request was answered" in str(error):
        return "expired"
    return "timeout" if "TIMEOUT)" in str(error) else "connection"
