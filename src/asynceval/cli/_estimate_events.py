"""`asynceval estimate`'s measurements: the sample run's events file read as repetition templates.

Each finished repetition becomes a `Template` (`_estimate_replay`): its calls in phases (the
attempts sorted by when they joined the line for a slot; an attempt that joined while the
current phase still had one out belongs to that phase, so a judge panel's parallel calls go out
together and an agent's calls one after the other are phases one after the other), the slot
time each attempt held (`released`'s `held_s`, less the pauses for the provider's announced
budget it sat through; its wait in line is left out too, since that wait is what the limits
make of the run, and the replay makes it again), its time before each phase
(the agent's own work, tools, backoffs) and after the last one (evaluation, a timeout).

A run pays some costs once, however long it is: its first `slots` attempts open the connections
the others reuse, its first repetition builds what the others share (a model, its client), its
first answers are the first to be read, scored and written. The repetitions that paid them are
`cold`; a run has as many as its sample had, at its start. (The first repetition's setup, when
the next one could only start after it, held up the whole run: that is `Measured.stall_s`,
added once to the run's time, not kept in any template.) In a sample of 20 they are a far
larger share than in the run, so `measure` gives them twice: as measured (`Measured.cold`,
replayed once, first) and, like every other repetition, in their warm form (`Measured.pool`,
replayed in proportion): without their excess over the warm repetitions (slot time over the
other attempts' mean, time before the first call and after the last over the same task's warm
repetitions', else over every warm repetition's median). A cold repetition's warm form keeps
what its task does itself (a slow agent, a timeout): the queue may well start the slow tasks
first.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._estimate_replay import Phase, Template


@dataclass(frozen=True)
class Measured:
    """The sample's repetitions: every one in its warm form (`pool`, in the order they
    started: what the run is drawn from), and the cold ones as measured (`cold`, by their
    index in the pool)."""

    cold: dict[int, Template]
    pool: list[Template]
    stall_s: float = 0.0


@dataclass
class _Attempt:
    queued: float
    held_s: float = 0.0
    released: float | None = None
    cold: bool = False


@dataclass
class _Repetition:
    key: tuple[str, int] = ("", 0)
    task: str = ""
    started: float | None = None
    finished: float | None = None
    attempts: dict[str, list[_Attempt]] = field(default_factory=dict)

    def done(self) -> list[_Attempt]:
        return [a for tries in self.attempts.values() for a in tries if a.released is not None]


def _seconds(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _pauses(events: Iterable[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """When the endpoint paused because the provider's announced budget was spent (start, end):
    the replay makes these pauses again (`Limits.burst`), so they are no part of a call."""
    found: list[tuple[float, float]] = []
    for event in events:
        if event.get("event") == "endpoint_paused" and event.get("reason") == "announced":
            at, seconds = _seconds(event.get("timestamp")), event.get("seconds")
            if at is not None and isinstance(seconds, int | float) and seconds > 0:
                found.append((at, at + float(seconds)))
    return found


def _unpaused(held_s: float, released: float, pauses: Sequence[tuple[float, float]]) -> float:
    """A slot's hold without the announced pauses it sat through (it held the slot while the
    endpoint waited for the provider's reset)."""
    start = released - held_s
    overlap = sum(max(0.0, min(end, released) - max(begin, start)) for begin, end in pauses)
    return max(0.0, held_s - overlap)


def _repetitions(events: Sequence[Mapping[str, Any]]) -> list[_Repetition]:
    """The finished repetitions of an events file, in the order they started."""
    reps: dict[tuple[str, int], _Repetition] = defaultdict(_Repetition)
    pauses = _pauses(events)
    for event in events:
        key, at = (event.get("task_id"), event.get("repeat_idx")), _seconds(event.get("timestamp"))
        if not isinstance(key[0], str) or not isinstance(key[1], int) or at is None:
            continue
        rep, name = reps[(key[0], key[1])], event.get("event")
        if name == "task_started" and rep.started is None:
            rep.key, rep.task, rep.started = (key[0], key[1]), key[0], at
        elif name == "task_finished":
            rep.finished = at
        elif name in ("queueing", "released"):
            tries = rep.attempts.setdefault(str(event.get("call_id")), [])
            if name == "queueing":
                tries.append(_Attempt(queued=at))
            elif tries and tries[-1].released is None:
                tries[-1].released = at
                tries[-1].held_s = _unpaused(float(event.get("held_s") or 0.0), at, pauses)
    finished = [r for r in reps.values() if r.started is not None and r.finished is not None]
    return sorted(finished, key=lambda r: r.started or 0.0)


def measure(
    events: Sequence[Mapping[str, Any]], tokens: Mapping[tuple[str, int], float], slots: int
) -> Measured:
    """The sample's templates; `tokens` are each repetition's prompt plus completion tokens
    (from its report) keyed (task_id, repeat_idx), spread evenly over its attempts."""
    reps = _repetitions(events)
    per_attempt = [tokens.get(r.key, 0.0) / max(1, len(r.done())) for r in reps]
    attempts = sorted(((a.queued, i, a) for i, r in enumerate(reps) for a in r.done()), key=_first)
    for _, _, attempt in attempts[:slots]:
        attempt.cold = True
    cold = {0, *(i for _, i, _ in attempts[:slots])} if reps else set()
    measured = [_template(rep, per) for rep, per in zip(reps, per_attempt, strict=True)]
    warm = [i for i in range(len(reps)) if i not in cold]
    if len(warm) < 2:  # hardly any to compare with: every repetition as measured
        return Measured({}, measured)
    stall = _stall(reps, measured, warm)
    if stall > 0:
        first = measured[0]
        lead = Phase(first.phases[0].think_s - stall, first.phases[0].held_s)
        measured[0] = dataclasses.replace(first, phases=(lead, *first.phases[1:]))
    held = [a.held_s for _, _, a in attempts if not a.cold]
    cold_held = [a.held_s for _, _, a in attempts[:slots]]
    cut = max(0.0, statistics.fmean(cold_held) - statistics.fmean(held)) if held else 0.0
    pool = [
        _warmed(_template(reps[i], per_attempt[i], cut), reps[i].task, measured, reps, warm)
        if i in cold
        else measured[i]
        for i in range(len(reps))
    ]
    return Measured({i: measured[i] for i in sorted(cold)}, pool, stall)


def _stall(reps: Sequence[_Repetition], measured: Sequence[Template], warm: Sequence[int]) -> float:
    """How long the first repetition held up the whole run before its first call: its time
    before that call over the warm repetitions' median, as far as the next repetition started
    only after it (the loop was busy with it: building a model, a client)."""
    if not measured[0].phases or len(reps) < 2 or reps[0].started is None:
        return 0.0
    excess = _lead(measured[0]) - statistics.median(_lead(measured[i]) for i in warm)
    return max(0.0, min(excess, (reps[1].started or reps[0].started) - reps[0].started))


def _first(item: tuple[float, int, _Attempt]) -> float:
    return item[0]


def _warmed(
    template: Template,
    task: str,
    measured: Sequence[Template],
    reps: Sequence[_Repetition],
    warm: Sequence[int],
) -> Template:
    """A cold repetition's template without its excess time before its first call and after
    its last, over the same task's warm repetitions (else over every warm one's median)."""
    same = [i for i in warm if reps[i].task == task] or list(warm)
    pick = statistics.fmean if len(same) < len(warm) or len(warm) == 1 else statistics.median
    lead = pick([_lead(measured[i]) for i in same])
    tail = pick([measured[i].tail_s for i in same])
    phases = template.phases
    if phases and phases[0].think_s > lead:
        phases = (dataclasses.replace(phases[0], think_s=lead), *phases[1:])
    return dataclasses.replace(template, phases=phases, tail_s=min(template.tail_s, tail))


def _lead(template: Template) -> float:
    return template.phases[0].think_s if template.phases else 0.0


def _template(rep: _Repetition, tokens_per_attempt: float, cut: float = 0.0) -> Template:
    """One repetition's phases; `cut` is taken off the slot time of its cold attempts."""
    assert rep.started is not None and rep.finished is not None
    done = sorted(rep.done(), key=lambda a: a.queued)
    phases: list[Phase] = []
    clock = rep.started  # the end of the last phase (or the repetition's start)
    group: list[_Attempt] = []
    group_end = -math.inf
    for attempt in done:
        end = attempt.released if attempt.released is not None else attempt.queued
        if group and attempt.queued < group_end:
            group.append(attempt)
            group_end = max(group_end, end)
            continue
        if group:
            phases.append(_phase(group, clock, cut))
            clock = group_end
        group, group_end = [attempt], end
    if group:
        phases.append(_phase(group, clock, cut))
        clock = group_end
    return Template(tuple(phases), max(0.0, rep.finished - clock), tokens_per_attempt)


def _phase(group: Sequence[_Attempt], since: float, cut: float) -> Phase:
    held = tuple(max(0.0, a.held_s - cut) if a.cold else a.held_s for a in group)
    return Phase(max(0.0, group[0].queued - since), held)


def run_overhead(events: Iterable[Mapping[str, Any]]) -> float:
    """The sample run's time outside its repetitions: from `run_started` to the first
    repetition's start, and from the last one's end to `run_finished` (0 when not known)."""
    started = first = last = finished = None
    for event in events:
        name, at = event.get("event"), _seconds(event.get("timestamp"))
        if at is None:
            continue
        if name == "run_started" and started is None:
            started = at
        elif name == "task_started" and first is None:
            first = at
        elif name == "task_finished":
            last = at
        elif name == "run_finished":
            finished = at
    if started is None or first is None or last is None or finished is None:
        return 0.0
    return max(0.0, first - started) + max(0.0, finished - last)
