"""`asynceval estimate`'s result: the sample run's directory read back and projected onto the whole
run (`project_sample`), and shown as a table or as JSON.

Calls, tokens and cost are projected from the reports' `usage` (`_estimate_stats`); wall time
from the events file (`_estimate_events`, `_estimate_wall`) at the limits the sample ran with, as
its results header records them (MAX_CONCURRENT_LLM_CALLS, MAX_CONCURRENT_TASKS,
LLM_REQUESTS_PER_MINUTE and LLM_TOKENS_PER_MINUTE, else the rate limits the provider announced
during the sample). A sample that is the whole run is the answer itself: its totals, with no
interval, and its measured wall time, within `MODEL_ERROR` (what a second run varies by).

Cost is each report's `usage.cost_usd` (the priced calls' cost, null when none was priced) and
`usage.unpriced_calls`: calls to a model without a price are never counted as $0; the estimate
says which model has no price (`usage.by_model`) instead.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from ..analysis.cost import money
from ..engine import read_records
from ._errors import CLIError
from ._estimate_events import measure, run_overhead
from ._estimate_replay import Limits
from ._estimate_sample import Sample
from ._estimate_stats import Total, project
from ._estimate_wall import MODEL_ERROR, wall_time


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

    @property
    def repetitions(self) -> int:
        return self.tasks * self.repeats


def _events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return events
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def project_sample(out: Path, sample: Sample, seed: int) -> Estimate:
    """The estimate from the sample run written in `out`."""
    records, _ = read_records(out / "results.jsonl")
    header = records[0] if records and records[0].get("type") == "header" else {}
    reports = [r for r in records if r.get("type") != "header" and "usage" in r]
    if not reports:
        raise CLIError("the sample run wrote no report; nothing to estimate from")
    events = _events(out / "events.jsonl")
    usage = [r.get("usage") or {} for r in reports]
    population = sample.population
    limits = _limits(header, events)

    def total(name: str) -> Total:
        return project([float(u.get(name) or 0) for u in usage], population)

    tokens = {
        (str(r.get("task_id")), int(r.get("repeat_idx") or 0)): float(
            (u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0)
        )
        for r, u in zip(reports, usage, strict=True)
    }
    finished = [e for e in events if e.get("event") == "run_finished"]
    measured_wall = float(finished[-1].get("duration_s") or 0.0) if finished else None
    if len(reports) >= population and measured_wall is not None:  # the sample is the run
        spread = MODEL_ERROR * measured_wall  # what a second run would vary by, not sampling
        wall = Total(measured_wall, measured_wall - spread, measured_wall + spread)
    else:
        found = measure(events, tokens, limits.llm_calls)
        overhead = run_overhead(events) + found.stall_s
        projection = wall_time(found, population, limits, overhead, seed)
        wall = Total(projection.estimate, projection.low, projection.high)
    calls, sent = sum(float(u.get("llm_calls") or 0) for u in usage), sum(tokens.values())
    rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
    paced = (rpm is not None and calls > rpm) or (tpm is not None and sent > tpm)
    return Estimate(
        tasks=sample.run_tasks,
        repeats=sample.repeats,
        sample=len(reports),
        seed=seed,
        limits=limits,
        lane=str((header.get("settings") or {}).get("llm_lane") or "live"),
        llm_calls=total("llm_calls"),
        prompt_tokens=total("prompt_tokens"),
        completion_tokens=total("completion_tokens"),
        cost=_cost(usage, population, header),
        wall_time_s=wall,
        sample_statuses=dict(Counter(str(r.get("status")) for r in reports)),
        sample_wall_s=measured_wall,
        sample_paced=paced,
        budget_usd=(header.get("settings") or {}).get("max_cost_usd"),
    )


def _limits(header: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> Limits:
    """The limits the sample ran with; rate limits the settings leave unset are those the
    provider announced, if it did (as the run's endpoint would take them)."""
    settings = header.get("settings") or {}
    learned = [e for e in events if e.get("event") == "rate_learned"]
    rpm = settings.get("llm_requests_per_minute")
    tpm = settings.get("llm_tokens_per_minute")
    if learned:
        rpm = rpm if rpm is not None else learned[-1].get("requests_per_minute")
        tpm = tpm if tpm is not None else learned[-1].get("tokens_per_minute")
    return Limits(
        llm_calls=int(
            header.get("max_concurrent_llm_calls") or settings.get("max_concurrent_llm_calls") or 5
        ),
        tasks=int(header.get("max_concurrent_tasks") or settings.get("max_concurrent_tasks") or 32),
        requests_per_minute=int(rpm) if rpm else None,
        tokens_per_minute=int(tpm) if tpm else None,
    )


def _cost(usage: Sequence[Mapping[str, Any]], population: int, header: Mapping[str, Any]) -> Cost:
    """The cost's projection from `usage.cost_usd` and `usage.unpriced_calls`."""
    measured = any("cost_usd" in u for u in usage)
    priced_any = any(u.get("cost_usd") is not None for u in usage)
    priced = project([float(u.get("cost_usd") or 0.0) for u in usage], population)
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


def cost_text(cost: Cost) -> tuple[str, str]:
    """The cost's estimate and interval as shown: unpriced calls said, never shown as $0."""
    if not cost.measured:
        return "not measured", "this asynceval does not price calls yet"
    no_price = f"model {', '.join(cost.unpriced_models)} has no price"
    if cost.priced is None:
        return f"unknown ({no_price})", ""
    shown = (money(cost.priced.estimate), f"{money(cost.priced.low)} - {money(cost.priced.high)}")
    if cost.unpriced_calls.estimate > 0:
        calls = f"{cost.unpriced_calls.estimate:,.0f}"
        return f"{shown[0]} + unknown ({calls} calls: {no_price})", shown[1]
    return shown


def _count(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{value:,.0f}"


def _duration(seconds: float) -> str:
    if math.isinf(seconds):
        return "unbounded"
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{int(minutes)} min {int(seconds % 60)} s"
    return f"{int(minutes // 60)} h {int(minutes % 60)} min"


def limits_text(estimate: Estimate) -> str:
    limits = estimate.limits
    rates = [
        f"{limit:,} {unit}/min"
        for limit, unit in (
            (limits.requests_per_minute, "requests"),
            (limits.tokens_per_minute, "tokens"),
        )
        if limit is not None
    ]
    budget = "" if estimate.budget_usd is None else f", budget {money(estimate.budget_usd)}"
    return (
        f"{limits.llm_calls} LLM calls and {limits.tasks} repetitions at once, "
        f"{', '.join(rates) or 'no rate limit'}, lane {estimate.lane}{budget}"
    )


def print_table(estimate: Estimate, stream: TextIO) -> None:
    """The estimate as a table, with a line on what it projects and from what."""
    table = Table(title="asynceval estimate", show_header=True)
    table.add_column("whole run", style="bold")
    table.add_column("estimate", justify="right")
    table.add_column("95% interval")
    for label, value in (
        ("LLM calls", estimate.llm_calls),
        ("prompt tokens", estimate.prompt_tokens),
        ("completion tokens", estimate.completion_tokens),
    ):
        table.add_row(label, _count(value.estimate), f"{_count(value.low)} - {_count(value.high)}")
    table.add_row("cost (USD)", *cost_text(estimate.cost))
    wall = estimate.wall_time_s
    table.add_row(
        "wall time", _duration(wall.estimate), f"{_duration(wall.low)} - {_duration(wall.high)}"
    )
    Console(file=stream).print(table)
    print(
        f"{_plural(estimate.repetitions, 'repetition')} ({_plural(estimate.tasks, 'task')} x "
        f"{_plural(estimate.repeats, 'repeat')}) projected from a sample of {estimate.sample} "
        f"(seed {estimate.seed}), at {limits_text(estimate)}",
        file=stream,
    )
    if estimate.lane == "batch":
        print(BATCH_WALL_TIME, file=stream)


BATCH_WALL_TIME = (
    "wall time in the batch lane: this is how long the sample's batches took here; a provider "
    "finishes most batches within an hour and promises 24 hours, and each turn of an agent is "
    "one batch round trip, so the real run may take far longer"
)
"""What the estimate says of its wall time in the batch lane, where the sample's replay at the
run's limits cannot see the provider's batch turnaround (its lines hold no slot)."""


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def as_json(estimate: Estimate) -> dict[str, Any]:
    """The estimate's numbers (an unbounded interval's end is null)."""

    def numbers(value: Total | None) -> dict[str, float | None] | None:
        if value is None:
            return None
        return {k: (None if math.isinf(v) else v) for k, v in value.as_dict().items()}

    limits = estimate.limits
    return {
        "repetitions": estimate.repetitions,
        "tasks": estimate.tasks,
        "repeats": estimate.repeats,
        "sample": estimate.sample,
        "seed": estimate.seed,
        "limits": {
            "max_concurrent_llm_calls": limits.llm_calls,
            "max_concurrent_tasks": limits.tasks,
            "llm_requests_per_minute": limits.requests_per_minute,
            "llm_tokens_per_minute": limits.tokens_per_minute,
        },
        "lane": estimate.lane,
        "budget_usd": estimate.budget_usd,
        "llm_calls": numbers(estimate.llm_calls),
        "prompt_tokens": numbers(estimate.prompt_tokens),
        "completion_tokens": numbers(estimate.completion_tokens),
        "cost_usd": numbers(estimate.cost.priced) if estimate.cost.measured else None,
        "unpriced_calls": numbers(estimate.cost.unpriced_calls) if estimate.cost.measured else None,
        "unpriced_models": list(estimate.cost.unpriced_models),
        "wall_time_s": numbers(estimate.wall_time_s),
        "sample_run": {
            "statuses": dict(estimate.sample_statuses),
            "wall_time_s": estimate.sample_wall_s,
            "rate_limited": estimate.sample_paced,
        },
    }
