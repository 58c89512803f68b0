"""Adaptive repeats (DESIGN section 18): one repetition per task, then more where the task-set
half-width narrows most, until it is <= W or every task has max_repeats; resume goes on by the
same rule. A fake benchmark with known pass probabilities, instant agents, no LLM."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from asynceval import AdaptiveRepeats, Benchmark, Task
from asynceval.engine import read_records
from asynceval.engine._adaptive_repeats import RepeatAllocator
from asynceval.engine.statistics import stratified_half_width
from asynceval.errors import ConfigError

from ..conftest import EventLog


class Coins(Benchmark):
    """Task metadata "p" is its pass probability; each (task, repeat) draws from its own seed,
    so a repetition's outcome is the same whenever it runs. "error": the agent always raises."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        def agent(query: Any) -> Any:
            if task.metadata.get("error"):
                raise RuntimeError("broken task")
            return query

        return [agent], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        from asynceval.engine import current_context

        context = current_context()
        assert context is not None
        draw = random.Random(f"{task.id}/{context.repeat_idx}").random()

        def coin(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": draw < float(task.metadata["p"])}

        return [coin]


def coin_tasks(probabilities: list[float]) -> list[Task]:
    return [Task(query=i, id=f"t{i:02d}", metadata={"p": p}) for i, p in enumerate(probabilities)]


def repetitions_by_task(path: Path) -> Counter[str]:
    records, _ = read_records(path)
    return Counter(r["task_id"] for r in records if "task_id" in r)


def test_the_rule_is_checked() -> None:
    """A width outside (0, 0.5], fewer than 2 repeats or a bad prior is a ConfigError; a
    repeats= that is not an AdaptiveRepeats is refused."""
    for bad in (0, -0.1, 0.6, float("nan"), True):
        with pytest.raises(ConfigError, match="ci_width"):
            AdaptiveRepeats(ci_width=bad)
    for most in (1, 0, 2.5, True):
        with pytest.raises(ConfigError, match="max_repeats"):
            AdaptiveRepeats(ci_width=0.1, max_repeats=most)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="prior"):
        AdaptiveRepeats(ci_width=0.1, prior=(0.0, 1.0))
    with pytest.raises(ConfigError, match="AdaptiveRepeats"):
        Coins().run_sync(coin_tasks([0.5]), repeats=3)


def test_the_allocator_gives_a_flipping_task_many_repeats_and_a_constant_one_few() -> None:
    """After a first outcome each, repetitions go where results vary; a task that always
    passes is never trusted to have variance 0 but gets far fewer."""
    rule = RepeatAllocator(AdaptiveRepeats(ci_width=0.1, max_repeats=100))
    steady, flipping = rule.add(), rule.add()
    outcomes = {steady: iter([1.0] * 100), flipping: iter([1.0, 0.0] * 50)}
    for first in (steady, flipping):
        rule.start(first)
        rule.finish(first, next(outcomes[first]))
    while (index := rule.choose()) is not None:
        rule.start(index)
        rule.finish(index, next(outcomes[index]))
    assert rule.repetitions(steady) >= 2  # a few identical outcomes are not variance 0
    assert rule.repetitions(flipping) >= 3 * rule.repetitions(steady)
    outcome = rule.outcome()
    assert outcome["stopped"] == "ci_width_reached"
    assert outcome["half_width"] <= 0.1
    assert outcome["repetitions"] == rule.repetitions(steady) + rule.repetitions(flipping)


def test_repetitions_in_flight_count_so_the_rule_does_not_over_allocate() -> None:
    """While its repetitions are in flight, the rule starts no more than it would need if they
    came back as expected: with the target met counting them, it says wait (None)."""
    rule = RepeatAllocator(AdaptiveRepeats(ci_width=0.2, max_repeats=100))
    index = rule.add([1.0, 0.0, 1.0, 0.0])
    started = 0
    while rule.choose() is not None:
        rule.start(index)
        started += 1
    assert 0 < started < 100 and rule.in_flight == started
    for _ in range(started):
        rule.finish(index, 0.5)
    assert rule.half_width() == pytest.approx(
        stratified_half_width([(2.0 + 0.5 * started, 4 + started)], prior=(0.1, 0.1))
    )


def test_a_task_that_only_errors_counts_toward_max_repeats_and_then_is_left_out() -> None:
    rule = RepeatAllocator(AdaptiveRepeats(ci_width=0.01, max_repeats=3))
    broken, fine = rule.add(), rule.add([1.0, 1.0, 1.0])
    while (index := rule.choose()) is not None:
        rule.start(index)
        rule.finish(index, None if index == broken else 1.0)
    assert rule.repetitions(broken) == 3 and rule.repetitions(fine) == 3
    assert rule.outcome()["stopped"] == "max_repeats"
    assert rule.half_width() == pytest.approx(stratified_half_width([(3.0, 3)], prior=(0.1, 0.1)))


async def test_a_run_stops_at_the_width_and_says_so(tmp_path: Path, event_log: EventLog) -> None:
    """20 tasks: 10 always pass or fail, 10 flip with known odds. The run stops once the
    stratified half-width is <= W, spends its repetitions on the flipping tasks, numbers them
    0, 1, 2... per task, and run_finished and bench.adaptive_outcome say why it stopped."""
    probabilities = [1.0] * 5 + [0.0] * 5 + [0.2 + 0.6 * i / 9 for i in range(10)]
    bench = Coins(max_concurrent_tasks=4)
    path = tmp_path / "results.jsonl"
    rule = AdaptiveRepeats(ci_width=0.04, max_repeats=40)
    await bench.run(coin_tasks(probabilities), results_path=path, repeats=rule)
    counts = repetitions_by_task(path)
    constant = [counts[f"t{i:02d}"] for i in range(10)]
    flipping = [counts[f"t{i:02d}"] for i in range(10, 20)]
    assert min(constant) >= 1 and sum(flipping) >= 2 * sum(constant)
    records, _ = read_records(path)
    reports = [r for r in records if "task_id" in r]
    for task_id, n in counts.items():
        assert sorted(r["repeat_idx"] for r in reports if r["task_id"] == task_id) == list(range(n))
    outcome = bench.adaptive_outcome
    assert outcome is not None and outcome["stopped"] == "ci_width_reached"
    scores: dict[str, list[float]] = {}
    for r in reports:
        scores.setdefault(r["task_id"], []).append(float(r["eval"][0]["passed"]))
    width = stratified_half_width([(sum(s), len(s)) for s in scores.values()], prior=(0.1, 0.1))
    assert width <= 0.04 and outcome["half_width"] == pytest.approx(width, abs=1e-6)
    assert outcome["repetitions"] == len(reports) < 20 * 40
    (finished,) = event_log.named("run_finished")
    assert finished["adaptive"]["stopped"] == "ci_width_reached"
    assert records[0]["adaptive_repeats"]["ci_width"] == 0.04  # the header records the rule


async def test_a_run_stops_at_max_repeats_when_the_width_is_out_of_reach(tmp_path: Path) -> None:
    bench = Coins(max_concurrent_tasks=3)
    path = tmp_path / "results.jsonl"
    tasks = coin_tasks([0.5, 0.5, 1.0])
    await bench.run(tasks, results_path=path, repeats=AdaptiveRepeats(0.01, max_repeats=4))
    assert repetitions_by_task(path) == {"t00": 4, "t01": 4, "t02": 4}
    assert bench.adaptive_outcome is not None
    assert bench.adaptive_outcome["stopped"] == "max_repeats"


async def test_errors_count_toward_max_repeats_but_not_as_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [*coin_tasks([1.0]), Task(query=9, id="broken", metadata={"p": 1.0, "error": True})]
    bench = Coins()
    await bench.run(tasks, results_path=path, repeats=AdaptiveRepeats(0.3, max_repeats=5))
    assert repetitions_by_task(path)["broken"] == 5
    assert bench.adaptive_outcome is not None
    assert bench.adaptive_outcome["stopped"] == "ci_width_reached"  # the broken task left out


async def test_resume_counts_the_repetitions_on_disk_and_continues_the_rule(
    tmp_path: Path,
) -> None:
    """A run cut short by a small max_repeats, resumed with a larger one: the repetitions
    already there count, indexes go on from them, none runs twice, and the resume goes on
    until the width the first segment could not reach."""
    probabilities = [1.0] * 4 + [0.3, 0.5, 0.6, 0.8]
    tasks = coin_tasks(probabilities)
    path = tmp_path / "results.jsonl"
    await Coins().run(tasks, results_path=path, repeats=AdaptiveRepeats(0.1, max_repeats=3))
    first = repetitions_by_task(path)
    assert max(first.values()) == 3
    bench = Coins()
    rule = AdaptiveRepeats(0.1, max_repeats=40)
    await bench.run(tasks, results_path=path, resume=True, repeats=rule)
    after = repetitions_by_task(path)
    assert all(after[t] >= first[t] for t in first)
    records, _ = read_records(path)
    pairs = [(r["task_id"], r["repeat_idx"]) for r in records if "task_id" in r]
    assert len(pairs) == len(set(pairs))  # no repetition run twice
    assert bench.adaptive_outcome is not None
    assert bench.adaptive_outcome["stopped"] == "ci_width_reached"
    assert bench.adaptive_outcome["repetitions"] == sum(after.values())
    scores: dict[str, list[float]] = {}
    for r in records:
        if "task_id" in r:
            scores.setdefault(r["task_id"], []).append(float(r["eval"][0]["passed"]))
    width = stratified_half_width([(sum(v), len(v)) for v in scores.values()], prior=(0.1, 0.1))
    assert (
        width
        <= 0.1
        < stratified_half_width(
            [(sum(v[:3]), min(3, len(v))) for v in scores.values()], prior=(0.1, 0.1)
        )
    )  # the first segment stopped short of the width; the resume reached it


async def test_resume_of_a_finished_adaptive_run_starts_nothing(tmp_path: Path) -> None:
    tasks = coin_tasks([1.0, 0.0, 0.5])
    path = tmp_path / "results.jsonl"
    rule = AdaptiveRepeats(0.2, max_repeats=20)
    await Coins().run(tasks, results_path=path, repeats=rule)
    before = repetitions_by_task(path)
    bench = Coins()
    await bench.run(tasks, results_path=path, resume=True, repeats=rule)
    assert repetitions_by_task(path) == before
    assert bench.adaptive_outcome is not None
    assert bench.adaptive_outcome["stopped"] == "ci_width_reached"


def test_reducers_are_kept_and_recorded_in_the_config() -> None:
    bench = Coins(reducers=["pass_at_k(2)", "median"])
    assert [r.name for r in bench.reducers] == ["pass_at_k(2)", "median"]
    assert bench.gather_config()["reducers"] == ["pass_at_k(2)", "median"]
    assert Coins().gather_config()["reducers"] == []
    with pytest.raises(ConfigError):
        Coins(reducers=["nope"])


async def test_the_results_header_records_the_reducers(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    await Coins(reducers=["max"]).run(coin_tasks([1.0]), results_path=path)
    records, _ = read_records(path)
    assert records[0]["benchmark_config"]["reducers"] == ["max"]
