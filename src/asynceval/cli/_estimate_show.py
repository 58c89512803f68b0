"""`asynceval estimate`'s result shown: a table with the lines that qualify it (what the sample
cost, what its intervals cannot know), or JSON (`as_json`).

Unpriced calls are said, never shown as $0; an interval's unbounded end is "unbounded" in the
table and null in JSON; a quantity every sampled repetition had the same of carries `uniform`,
and one whose interval was widened for tasks unlike every sampled one carries `unlike`.
"""

from __future__ import annotations

import math
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from ..analysis.cost import money
from ._estimate_report import Cost, Estimate
from ._estimate_stats import Total


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
    if limits.burst is not None:
        rates.append(
            f"the provider's announced budget of {limits.burst:,} requests "
            f"(reset {limits.burst_reset_s:.3g} s after it is spent)"
        )
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
    drawn = (
        f"the {estimate.sample} repetitions that finished of a sample of "
        f"{estimate.sample_planned} (seed {estimate.seed}; the budget cut the rest)"
        if estimate.sample < estimate.sample_planned
        else f"a sample of {estimate.sample} (seed {estimate.seed})"
    )
    print(
        f"{_plural(estimate.repetitions, 'repetition')} ({_plural(estimate.tasks, 'task')} x "
        f"{_plural(estimate.repeats, 'repeat')}) projected from {drawn}, at "
        f"{limits_text(estimate)}",
        file=stream,
    )
    print(sample_cost_text(estimate), file=stream)
    for line in caveats(estimate):
        print(line, file=stream)
    if estimate.lane == "batch":
        print(BATCH_WALL_TIME, file=stream)


def sample_cost_text(estimate: Estimate) -> str:
    """What the sample itself cost, and that the run does not pay for it again."""
    unpriced = estimate.sample_unpriced_calls
    if estimate.sample_cost_usd is None:
        cost = f"an unknown amount ({_plural(unpriced, 'call')} with no price)"
    else:
        cost = money(estimate.sample_cost_usd)
        if unpriced:
            cost += f" + {_plural(unpriced, 'call')} with no price"
    where = f" (in {estimate.directory})" if estimate.directory else ""
    return (
        f"the sample cost {cost}{where}: the run that resumes its directory does not pay "
        "for it again"
    )


def caveats(estimate: Estimate) -> list[str]:
    """What the intervals cannot know: quantities every sampled repetition had the same of,
    and tasks unlike every sampled one."""
    lines: list[str] = []
    priced = estimate.cost.priced
    if priced is not None and priced.uniform:
        lines.append(
            "every sampled repetition cost the same: the interval does not cover tasks "
            "unlike the sample"
        )
    same = [
        label
        for label, value in (
            ("LLM calls", estimate.llm_calls),
            ("prompt tokens", estimate.prompt_tokens),
            ("completion tokens", estimate.completion_tokens),
        )
        if value.uniform
    ]
    if same:
        named = " and ".join([", ".join(same[:-1]), same[-1]] if len(same) > 1 else same)
        lines.append(
            f"every sampled repetition had the same {named}: the interval does not cover tasks "
            "unlike the sample"
        )
    if estimate.prompt_tokens.unlike:
        lines.append(
            "the run holds tasks whose queries are far longer or shorter than any sampled "
            "one: the tokens' and cost's intervals reach the estimate in proportion to query "
            "size"
        )
    return lines


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

    def numbers(value: Total | None) -> dict[str, float | bool | None] | None:
        if value is None:
            return None
        return {
            k: (None if not isinstance(v, bool) and math.isinf(v) else v)
            for k, v in value.as_dict().items()
        }

    limits = estimate.limits
    return {
        "repetitions": estimate.repetitions,
        "tasks": estimate.tasks,
        "repeats": estimate.repeats,
        "sample": estimate.sample,
        "sample_drawn": estimate.sample_planned,
        "seed": estimate.seed,
        "limits": {
            "max_concurrent_llm_calls": limits.llm_calls,
            "max_concurrent_tasks": limits.tasks,
            "llm_requests_per_minute": limits.requests_per_minute,
            "llm_tokens_per_minute": limits.tokens_per_minute,
            "announced_requests": limits.burst,
            "announced_reset_s": limits.burst_reset_s if limits.burst is not None else None,
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
        "sample_cost_usd": estimate.sample_cost_usd,
        "sample_unpriced_calls": estimate.sample_unpriced_calls,
        "run_directory": estimate.directory,
        "sample_run": {
            "statuses": dict(estimate.sample_statuses),
            "wall_time_s": estimate.sample_wall_s,
            "rate_limited": estimate.sample_paced,
        },
    }
