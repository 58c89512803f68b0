"""`asynceval estimate`'s result: the sample run's directory read back and projected onto the whole
run (`project_sample`; `_estimate_show` shows it as a table or as JSON).

Calls, tokens and cost are projected from the reports' `usage` (`_estimate_stats`), with every
task's query size to tell when the sample holds no task like some of the run's; wall time from
the events file (`_estimate_events`, `_estimate_wall`) at the limits the sample ran with, as its
results header records them (MAX_CONCURRENT_LLM_CALLS, MAX_CONCURRENT_TASKS,
LLM_REQUESTS_PER_MINUTE and LLM_TOKENS_PER_MINUTE, else the rate limits the provider announced
during the sample), and the budget the provider's answers announced (what they said was left,
and when it reset). A sample that is the whole run is the answer itself: its totals, with no
interval, and its measured wall time, within `MODEL_ERROR` (what a second run varies by).
Repetitions the budget cut short (`budget_exhausted`) are no whole repetitions: the projection
is made from those that finished, and says how many.

Cost is each report's `usage.cost_usd` (the priced calls' cost, null when none was priced) and
`usage.unpriced_calls`: calls to a model without a price are never counted as $0; the estimate
says which model has no price (`usage.by_model`) instead. What the sample itself cost is the sum
of its `released` and `batch_completed` events' `cost_usd`: what the provider billed, retries
and cut repetitions included.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import TaskExecutionStatus, read_records
from ..engine.results import iter_records
from ._errors import CLIError
from ._estimate_events import measure, run_overhead
from ._estimate_replay import Limits
from ._estimate_sample import Sample, query_size
from ._estimate_stats import QuerySizes, Total, project
from ._estimate_wall import MODEL_ERROR, wall_time

BUDGET_CUT = TaskExecutionStatus.BUDGET_EXHAUSTED.value
"""The status of a repetition the budget stopped: not a whole repetition, left out."""


@dataclass(frozen=True)
class Cost:
    """The projected cost: of the priced calls (None when none was), and the unpriced calls."""

    priced: Total | None
    unpriced_calls: Total
    unpriced_models: tuple[str, ...]
    measured: bool  # whether the reports carry cost at all (an asynceval that prices calls)


@dataclass(frozen=True)
class Estimate:
    """The whole run projected from its sample."""

    tasks: int
    repeats: int
    sample: int
    seed: int
    limits: Limits
    lane: str
    llm_calls: Total
    prompt_tokens: Total
    completion_tokens: Total
    cost: Cost
    wall_time_s: Total
    sample_statuses: Mapping[str, int] = field(default_factory=dict)
    sample_wall_s: float | None = None
    sample_paced: bool = False
    budget_usd: float | None = None  # the run's --max-cost (MAX_COST_USD)
    sample_planned: int = 0  # the repetitions drawn (more than `sample` when the budget cut it)
    sample_cost_usd: float | None = None  # what the sample's calls cost (None: none priced)
    sample_unpriced_calls: int = 0
    directory: str = ""  # the sample's run directory

    @property
    def repetitions(self) -> int:
        return self.tasks * self.repeats


def _events(path: Path) -> list[dict[str, Any]]:
    """The sample's events (none when its file cannot be read; a line cut short is skipped)."""
    try:
        return [event for event in iter_records(path) if event is not None]
    except OSError:
        return []


def project_sample(out: Path, sample: Sample, seed: int) -> Estimate:
    """The estimate from the sample run written in `out`: from the repetitions that finished
    (those the budget cut short are left out, and said)."""
    records, _ = read_records(out / "results.jsonl")
    header = records[0] if records and records[0].get("type") == "header" else {}
    reports = [
        r
        for r in records
        if r.get("type") != "header" and "usage" in r and r.get("status") != BUDGET_CUT
    ]
    if not reports:
        raise CLIError("the sample run finished no repetition; nothing to estimate from")
    events = _events(out / "events.jsonl")
    usage = [r.get("usage") or {} for r in reports]
    population = sample.population
    limits = _limits(header, events)
    sizes = _sizes(sample, reports)

    def total(name: str, by_size: bool = True) -> Total:
        return project(
            [float(u.get(name) or 0) for u in usage], population, sizes if by_size else None
        )

    tokens = {
        (str(r.get("task_id")), int(r.get("repeat_idx") or 0)): float(
            (u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0)
        )
        for r, u in zip(reports, usage, strict=True)
    }
    wall, measured_wall = _wall(events, tokens, len(reports), population, limits, seed)
    calls, sent = sum(float(u.get("llm_calls") or 0) for u in usage), sum(tokens.values())
    rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
    paced = (rpm is not None and calls > rpm) or (tpm is not None and sent > tpm)
    spent, unpriced = _spent(events)
    return Estimate(
        tasks=sample.run_tasks,
        repeats=sample.repeats,
        sample=len(reports),
        seed=seed,
        limits=limits,
        lane=str((header.get("settings") or {}).get("llm_lane") or "live"),
        llm_calls=total("llm_calls", by_size=False),
        prompt_tokens=total("prompt_tokens"),
        completion_tokens=total("completion_tokens"),
        cost=_cost(usage, population, header, sizes),
        wall_time_s=wall,
        sample_statuses=dict(Counter(str(r.get("status")) for r in reports)),
        sample_wall_s=measured_wall,
        sample_paced=paced,
        budget_usd=(header.get("settings") or {}).get("max_cost_usd"),
        sample_planned=sample.size,
        sample_cost_usd=spent,
        sample_unpriced_calls=unpriced,
        directory=str(out),
    )


def _sizes(sample: Sample, reports: Sequence[Mapping[str, Any]]) -> QuerySizes:
    """The query sizes of the sampled reports' tasks, against the whole run's."""
    size_of = {task.id: query_size(task) for task in sample.tasks}
    return QuerySizes(
        [size_of.get(str(r.get("task_id")), 1.0) for r in reports],
        sample.sizes.total * sample.repeats,
        sample.sizes.least,
        sample.sizes.most,
    )


def _wall(
    events: Sequence[Mapping[str, Any]],
    tokens: Mapping[tuple[str, int], float],
    sampled: int,
    population: int,
    limits: Limits,
    seed: int,
) -> tuple[Total, float | None]:
    """(The run's projected wall time, the sample's own): measured when the sample is the
    whole run, else replayed at the run's limits."""
    finished = [e for e in events if e.get("event") == "run_finished"]
    measured = float(finished[-1].get("duration_s") or 0.0) if finished else None
    if sampled >= population and measured is not None:  # the sample is the run
        spread = MODEL_ERROR * measured  # what a second run would vary by, not sampling
        return Total(measured, measured - spread, measured + spread), measured
    found = measure(events, tokens, limits.llm_calls)
    overhead = run_overhead(events) + found.stall_s
    projection = wall_time(found, population, limits, overhead, seed)
    return Total(projection.estimate, projection.low, projection.high), measured


def _spent(events: Sequence[Mapping[str, Any]]) -> tuple[float | None, int]:
    """What the sample's calls cost, as the provider billed them (the `cost_usd` of every
    `released` event, and of every `batch_completed` one: a batch's lines hold no slot, so no
    `released` says what they cost; retries and repetitions the budget cut included; None when
    no call was priced), and how many calls had no price."""
    priced: list[float] = []
    unpriced = 0
    for event in events:
        name = event.get("event")
        if name not in ("released", "batch_completed"):
            continue
        cost = event.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            priced.append(float(cost))
        elif event.get("unpriced"):  # a call with no price (a batch's submission has none)
            unpriced += 1
    return (math.fsum(priced) if priced else None), unpriced


def _limits(header: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> Limits:
    """The limits the sample ran with; rate limits the settings leave unset are those the
    provider announced, if it did (as the run's endpoint would take them), and so is the
    budget its answers announced (`_announced_budget`)."""
    settings = header.get("settings") or {}
    learned = [e for e in events if e.get("event") == "rate_learned"]
    rpm = settings.get("llm_requests_per_minute")
    tpm = settings.get("llm_tokens_per_minute")
    if learned:
        rpm = rpm if rpm is not None else learned[-1].get("requests_per_minute")
        tpm = tpm if tpm is not None else learned[-1].get("tokens_per_minute")
    burst, reset = _announced_budget(events, learned)
    return Limits(
        llm_calls=int(
            header.get("max_concurrent_llm_calls") or settings.get("max_concurrent_llm_calls") or 5
        ),
        tasks=int(header.get("max_concurrent_tasks") or settings.get("max_concurrent_tasks") or 32),
        requests_per_minute=int(rpm) if rpm else None,
        tokens_per_minute=int(tpm) if tpm else None,
        burst=burst,
        burst_reset_s=reset,
    )


def _announced_budget(
    events: Sequence[Mapping[str, Any]], learned: Sequence[Mapping[str, Any]]
) -> tuple[int | None, float]:
    """The requests the provider's announced budget holds and its reset, as the sample met
    them: what the first announcement said was left, plus the request it answered (else the
    sends before the first pause the answers asked for: `endpoint_paused`, reason "announced",
    which may count a send or two that raced the pause); the reset is that pause's length, else
    the budget over the announced rate (a budget the sample did not spend). (None, 0.0) when
    the provider announced nothing."""
    sends, burst, reset = 0, None, 0.0
    for event in events:
        name = event.get("event")
        if name == "acquired":
            sends += 1
        elif name == "endpoint_paused" and event.get("reason") == "announced":
            seconds = event.get("seconds")
            if isinstance(seconds, int | float) and seconds > 0 and sends > 0:
                burst, reset = sends, float(seconds)
            break
    first = learned[0] if learned else {}
    left, rate = first.get("remaining_requests"), first.get("requests_per_minute")
    if isinstance(left, int) and left >= 0:
        if burst is not None:
            return left + 1, reset
        if isinstance(rate, int | float) and rate > 0:
            return left + 1, (left + 1) * 60.0 / float(rate)
    return burst, reset


def _cost(
    usage: Sequence[Mapping[str, Any]],
    population: int,
    header: Mapping[str, Any],
    sizes: QuerySizes,
) -> Cost:
    """The cost's projection from `usage.cost_usd` and `usage.unpriced_calls`."""
    measured = any("cost_usd" in u for u in usage)
    priced_any = any(u.get("cost_usd") is not None for u in usage)
    priced = project([float(u.get("cost_usd") or 0.0) for u in usage], population, sizes)
    unpriced = project([float(u.get("unpriced_calls") or 0) for u in usage], population)
    models: list[str] = []
    if unpriced.estimate > 0:
        for u in usage:  # usage.by_model: {MODEL: {"calls": N, "cost_usd": null}} when unpriced
            for name, tally in (u.get("by_model") or {}).items():
                unpriced_here = isinstance(tally, Mapping) and tally.get("cost_usd") is None
                if unpriced_here and str(name) not in models:
                    models.append(str(name))
        if not models:
            model = (header.get("settings") or {}).get("llm_model")
            models.append(str(model) if model else "the configured model")
    return Cost(priced if priced_any else None, unpriced, tuple(models), measured)
