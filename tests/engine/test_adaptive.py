"""AdaptiveQueue: 2PL item selection by Fisher information, EAP estimation, stopping rules, and
learning from a resumed run's earlier reports."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from asynceval.engine.adaptive import (
    AdaptiveQueue,
    default_score,
    item_information,
    probability_correct,
)
from asynceval.engine.task import Task

from ._benches import Agents

PASS: dict[str, Any] = {"status": "success", "eval": [{"passed": True}]}
FAIL: dict[str, Any] = {"status": "success", "eval": [{"passed": False}]}


def item(task_id: str, b: float = 0.0, a: float = 1.0) -> Task:
    return Task(query=task_id, id=task_id, metadata={"difficulty": b, "discrimination": a})


def issue_all(queue: AdaptiveQueue) -> list[str]:
    ids = []
    while (task := queue.next_task()) is not None:
        ids.append(task.id)
    return ids


def brute_force_eap(
    observations: list[tuple[float, float, float]], mean: float, sd: float
) -> tuple[float, float]:
    """Posterior mean and sd by direct integration of prior × likelihood on a very fine grid."""
    step = 0.001
    thetas = [mean + (i - 15_000) * step * sd for i in range(30_001)]  # mean ± 15 sd
    weights = []
    for theta in thetas:
        density = math.exp(-0.5 * ((theta - mean) / sd) ** 2)
        for a, b, u in observations:
            p = 1.0 / (1.0 + math.exp(-a * (theta - b)))
            density *= p**u * (1.0 - p) ** (1.0 - u)
        weights.append(density)
    total = math.fsum(weights)
    post_mean = math.fsum(w * t for w, t in zip(weights, thetas, strict=True)) / total
    var = math.fsum(w * (t - post_mean) ** 2 for w, t in zip(weights, thetas, strict=True)) / total
    return post_mean, math.sqrt(var)


# --- selection ---------------------------------------------------------------------------------


def test_first_pick_at_prior_is_the_item_whose_difficulty_matches_the_ability() -> None:
    queue = AdaptiveQueue([item("hard", 2.0), item("medium", 0.0), item("easy", -2.0)])
    assert queue.next_task() == item("medium", 0.0)


def test_higher_discrimination_wins_at_the_same_difficulty() -> None:
    queue = AdaptiveQueue([item("low", 0.5, a=0.8), item("high", 0.5, a=1.9), item("mid", 0.5)])
    assert issue_all(queue) == ["high", "mid", "low"]


def test_equally_informative_items_keep_their_given_order() -> None:
    queue = AdaptiveQueue([item("c", 1.0), item("a", 1.0), item("b", 1.0)])
    assert issue_all(queue) == ["c", "a", "b"]


def test_selection_follows_the_estimate_after_answers() -> None:
    bank = [item(f"b{b}", float(b)) for b in range(-3, 4)]
    queue = AdaptiveQueue(bank)
    first = queue.next_task()
    assert first is not None and first.id == "b0"
    queue.on_task_complete(first, PASS)
    second = queue.next_task()
    assert second is not None and second.id == "b1"  # θ̂ ≈ 0.41 now: b=1 is the nearest


def test_eight_calls_before_any_result_issue_the_eight_most_informative_items() -> None:
    rng = random.Random(7)
    bank = [item(f"q{i}", rng.uniform(-3, 3), rng.uniform(0.8, 2.0)) for i in range(30)]
    queue = AdaptiveQueue(bank)
    issued = [queue.next_task() for _ in range(8)]
    best = sorted(
        bank,
        key=lambda t: (
            -item_information(0.0, t.metadata["discrimination"], t.metadata["difficulty"])
        ),
    )
    assert [t.id for t in issued if t is not None] == [t.id for t in best[:8]]
    assert queue.n_issued == 8 and queue.n_observations == 0
    assert queue.should_continue()


def test_issued_items_are_never_issued_again_and_the_bank_then_runs_out() -> None:
    queue = AdaptiveQueue([item(f"q{i}", i / 3) for i in range(6)], se_threshold=1e-9)
    first = queue.next_task()
    assert first is not None
    queue.on_task_complete(first, FAIL)
    rest = issue_all(queue)
    assert sorted([first.id, *rest]) == [f"q{i}" for i in range(6)]
    assert queue.stop_reason == "exhausted"
    assert not queue.should_continue()


# --- estimation ---------------------------------------------------------------------------------


def test_before_any_observation_the_estimate_is_the_prior() -> None:
    queue = AdaptiveQueue([item("x")], prior_mean=0.7, prior_sd=1.3)
    assert (queue.ability, queue.standard_error) == (0.7, 1.3)
    assert queue.stop_reason is None


@pytest.mark.parametrize(("mean", "sd"), [(0.0, 1.0), (0.5, 2.0), (-1.0, 0.6)])
def test_eap_matches_a_brute_force_integration(mean: float, sd: float) -> None:
    spec = [
        ("q1", -0.5, 1.2, 1.0),
        ("q2", 1.0, 0.8, 0.0),
        ("q3", 0.3, 1.5, 0.6),
        ("q1", -0.5, 1.2, 1.0),
    ]
    bank = {task_id: item(task_id, b, a) for task_id, b, a, _ in spec}
    queue = AdaptiveQueue(bank.values(), prior_mean=mean, prior_sd=sd, se_threshold=1e-9)
    issue_all(queue)
    for task_id, _, _, u in spec:
        queue.on_task_complete(bank[task_id], {"status": "success", "eval": [{"score": u}]})
    expected_mean, expected_sd = brute_force_eap([(a, b, u) for _, b, a, u in spec], mean, sd)
    assert queue.ability == pytest.approx(expected_mean, abs=1e-6)
    assert queue.standard_error == pytest.approx(expected_sd, abs=1e-6)
    assert queue.n_observations == 4


def test_a_correct_answer_raises_the_estimate_and_a_wrong_one_lowers_it() -> None:
    up = AdaptiveQueue([item("x")])
    task = up.next_task()
    assert task is not None
    up.on_task_complete(task, PASS)
    down = AdaptiveQueue([item("x")])
    assert down.next_task() == task
    down.on_task_complete(task, FAIL)
    assert up.ability > 0 > down.ability
    assert up.ability == pytest.approx(-down.ability)


def test_standard_error_shrinks_as_observations_accumulate() -> None:
    bank = [item(f"q{i}", 0.0, 1.5) for i in range(6)]
    queue = AdaptiveQueue(bank, se_threshold=1e-9)
    errors = [queue.standard_error]
    for i, task in enumerate(bank):
        assert queue.next_task() is not None
        queue.on_task_complete(task, PASS if i % 2 else FAIL)
        errors.append(queue.standard_error)
    assert all(later < earlier for earlier, later in itertools.pairwise(errors))


def test_partial_credit_lands_between_a_wrong_and_a_correct_answer() -> None:
    results = []
    for u in (0.0, 0.3, 0.5, 1.0):
        queue = AdaptiveQueue([item("x", 0.0)])
        task = queue.next_task()
        assert task is not None
        queue.on_task_complete(task, {"status": "success", "eval": [{"score": u}]})
        results.append(queue.ability)
    assert results[0] < results[1] < results[2] < results[3]
    assert results[2] == pytest.approx(0.0, abs=1e-12)  # half credit at b = θ̂ is symmetric


def test_each_repetition_of_an_item_adds_an_observation() -> None:
    queue = AdaptiveQueue([item("x"), item("y", 3.0)], se_threshold=1e-9)
    task = queue.next_task()
    assert task is not None
    queue.on_task_complete(task, PASS)
    once = queue.ability
    queue.on_task_complete(task, PASS)
    assert queue.ability > once
    assert queue.n_observations == 2
    assert [entry[0] for entry in queue.summary()["history"]] == ["x", "x"]


def test_non_observations_leave_the_estimate_unchanged() -> None:
    queue = AdaptiveQueue([item("x"), item("y")])
    task = queue.next_task()
    assert task is not None
    for report in (
        {"status": "agent_error", "eval": None},
        {"status": "task_timeout", "eval": [{"passed": True}]},
        {"status": "success", "eval": None},
        {"status": "success"},
        {"status": "success", "eval": [{"note": "no verdict"}]},
    ):
        queue.on_task_complete(task, report)
    assert (queue.ability, queue.standard_error, queue.n_observations) == (0.0, 1.0, 0)
    assert queue.summary()["history"] == []


def test_extreme_item_parameters_do_not_overflow() -> None:
    bank = [item("far", 1e3, 1e3), item("steep", 0.0, 500.0), item("flat", -1e3, 1e-6)]
    queue = AdaptiveQueue(bank, se_threshold=1e-9)
    for task, report in zip(issue_all(queue), (PASS, FAIL, PASS), strict=True):
        queue.on_task_complete(next(t for t in bank if t.id == task), report)
    assert math.isfinite(queue.ability) and math.isfinite(queue.standard_error)
    assert probability_correct(-1e6, 10.0, 1e6) == 0.0
    assert probability_correct(1e6, 10.0, -1e6) == 1.0


def simulate(seed: int, true_theta: float, in_flight: int) -> AdaptiveQueue:
    """Run a CAT on a synthetic 200-item 2PL bank, `in_flight` items issued before reporting."""
    rng = random.Random(seed)
    bank = [item(f"q{i}", rng.uniform(-3, 3), rng.uniform(0.8, 2.0)) for i in range(200)]
    queue = AdaptiveQueue(bank, se_threshold=0.3)
    while True:
        batch = [task for task in (queue.next_task() for _ in range(in_flight)) if task is not None]
        if not batch:
            return queue
        for task in batch:
            a, b = task.metadata["discrimination"], task.metadata["difficulty"]
            correct = rng.random() < probability_correct(true_theta, a, b)
            queue.on_task_complete(task, PASS if correct else FAIL)
        if not queue.should_continue():
            return queue


def test_recovers_a_known_ability_on_synthetic_2pl_data_within_its_standard_error() -> None:
    within_one = within_two = 0
    runs = 40
    for seed in range(runs):
        true_theta = random.Random(10_000 + seed).uniform(-2, 2)
        queue = simulate(seed, true_theta, in_flight=4 if seed % 2 else 1)
        assert queue.stop_reason == "se_threshold"
        assert queue.standard_error < 0.3
        assert queue.n_issued <= 40  # well before the 200-item bank runs out
        error = abs(queue.ability - true_theta) / queue.standard_error
        within_one += error <= 1
        within_two += error <= 2
    assert within_two >= 0.85 * runs
    assert within_one >= 0.5 * runs


# --- stopping -----------------------------------------------------------------------------------


def test_budget_stops_issuing_after_that_many_items() -> None:
    queue = AdaptiveQueue([item(f"q{i}", i / 10) for i in range(10)], budget=3, se_threshold=1e-9)
    issued = [queue.next_task() for _ in range(3)]
    assert all(task is not None for task in issued)
    assert queue.next_task() is None
    assert queue.stop_reason == "budget"
    assert not queue.should_continue()
    assert queue.n_issued == 3


def test_should_continue_is_false_once_the_budget_is_spent_with_items_in_flight() -> None:
    queue = AdaptiveQueue([item(f"q{i}") for i in range(5)], budget=2, se_threshold=1e-9)
    first, second = queue.next_task(), queue.next_task()
    assert first is not None and second is not None
    queue.on_task_complete(first, PASS)
    assert not queue.should_continue()
    assert queue.stop_reason == "budget"
    queue.on_task_complete(second, PASS)  # the in-flight result still counts
    assert queue.n_observations == 2


def test_stops_with_se_threshold_once_the_estimate_is_precise_and_stays_stopped() -> None:
    bank = [item(f"q{i}", 0.0, 2.0) for i in range(40)]
    queue = AdaptiveQueue(bank, se_threshold=0.5)
    while queue.should_continue():
        task = queue.next_task()
        assert task is not None
        queue.on_task_complete(task, PASS if queue.n_issued % 2 else FAIL)
    assert queue.stop_reason == "se_threshold"
    assert queue.standard_error < 0.5
    assert queue.next_task() is None
    assert queue.n_issued < 40


def test_exhausted_when_the_bank_empties_and_for_an_empty_bank() -> None:
    queue = AdaptiveQueue([item("x"), item("y")], se_threshold=1e-9)
    assert len(issue_all(queue)) == 2
    assert queue.stop_reason == "exhausted"
    empty = AdaptiveQueue([])
    assert not empty.should_continue()
    assert empty.next_task() is None
    assert empty.stop_reason == "exhausted"


def test_a_prior_already_narrower_than_the_threshold_issues_nothing() -> None:
    queue = AdaptiveQueue([item("x")], prior_sd=0.2, se_threshold=0.3)
    assert queue.next_task() is None
    assert queue.stop_reason == "se_threshold"


# --- scoring ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ({"status": "success", "eval": [{"passed": True}, {"passed": True}]}, 1.0),
        ({"status": "success", "eval": [{"passed": True}, {"passed": False}]}, 0.0),
        ({"status": "success", "eval": [{"passed": True, "score": 0.1}, {"score": 0.2}]}, 1.0),
        ({"status": "success", "eval": [{"score": 0.25}, {"score": 0.75}]}, 0.5),
        ({"status": "success", "eval": [{"score": 1}, {"score": 7}, {"score": True}]}, 1.0),
        ({"status": "success", "eval": [{"passed": "yes"}, {"score": 0.4}]}, 0.4),
        ({"status": "success", "eval": [{"score": 7.0}]}, None),
        ({"status": "success", "eval": [{"score": float("nan")}]}, None),
        ({"status": "success", "eval": []}, None),
        ({"status": "success", "eval": None}, None),
        ({"status": "success"}, None),
        ({"status": "success", "eval": "passed"}, None),
        ({"status": "agent_error", "eval": [{"passed": True}]}, None),
        ({"status": "evaluation_failed", "eval": [{"score": 1.0}]}, None),
        ({"eval": [{"passed": True}]}, None),
    ],
)
def test_default_score_rules(report: Mapping[str, Any], expected: float | None) -> None:
    assert default_score(report) == expected


def test_a_custom_score_function_decides_what_counts() -> None:
    queue = AdaptiveQueue([item("x")], score=lambda report: report.get("grade"))
    task = queue.next_task()
    assert task is not None
    queue.on_task_complete(task, {"status": "success", "eval": None, "grade": 1.0})
    assert queue.ability > 0
    assert queue.summary()["history"] == [("x", 1.0, 0.0, 1.0)]


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan")])
def test_a_score_outside_zero_to_one_is_refused(bad: float) -> None:
    queue = AdaptiveQueue([item("x")], score=lambda report: bad)
    task = queue.next_task()
    assert task is not None
    with pytest.raises(ValueError, match="score for task 'x'"):
        queue.on_task_complete(task, PASS)


def test_a_result_for_a_task_not_issued_by_the_queue_is_refused() -> None:
    queue = AdaptiveQueue([item("x"), item("y", 2.0)])
    with pytest.raises(ValueError, match="'zzz' was not issued"):
        queue.on_task_complete(item("zzz"), PASS)
    with pytest.raises(ValueError, match="'y' was not issued"):
        queue.on_task_complete(item("y", 2.0), PASS)


# --- construction and validation ---------------------------------------------------------------


def test_dict_tasks_and_missing_metadata_use_the_defaults() -> None:
    queue = AdaptiveQueue(
        [
            {"query": "q", "id": "plain"},
            {"query": "q", "id": "tuned", "metadata": {"difficulty": 0.5}},
        ],
        default_difficulty=0.5,
        default_discrimination=1.7,
    )
    task = queue.next_task()
    assert task is not None and task.id == "plain"
    queue.on_task_complete(task, FAIL)
    assert queue.summary() == {
        "ability": queue.ability,
        "standard_error": queue.standard_error,
        "stop_reason": None,
        "n_observations": 1,
        "n_issued": 1,
        "history": [("plain", 1.7, 0.5, 0.0)],
    }


@pytest.mark.parametrize(
    ("metadata", "key"),
    [
        ({"difficulty": "hard"}, "difficulty"),
        ({"difficulty": float("inf")}, "difficulty"),
        ({"difficulty": None}, "difficulty"),
        ({"discrimination": 0}, "discrimination"),
        ({"discrimination": -1.0}, "discrimination"),
        ({"discrimination": float("nan")}, "discrimination"),
        ({"discrimination": True}, "discrimination"),
    ],
)
def test_bad_item_parameters_are_refused_naming_the_task_and_key(
    metadata: dict[str, Any], key: str
) -> None:
    with pytest.raises(ValueError, match=f"task 'bad': metadata '{key}'"):
        AdaptiveQueue([item("ok"), Task(query="q", id="bad", metadata=metadata)])


def test_duplicate_task_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="'x' appears twice"):
        AdaptiveQueue([item("x"), item("y"), item("x", 1.0)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"se_threshold": 0}, "se_threshold"),
        ({"se_threshold": -0.1}, "se_threshold"),
        ({"budget": 0}, "budget"),
        ({"budget": 2.5}, "budget"),
        ({"prior_sd": 0}, "prior_sd"),
        ({"prior_mean": float("nan")}, "prior_mean"),
        ({"default_discrimination": 0}, "default_discrimination"),
        ({"default_difficulty": float("inf")}, "default_difficulty"),
        ({"grid_points": 10}, "grid_points"),
        ({"grid_span": 0}, "grid_span"),
        ({"score": "passed"}, "score"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveQueue([item("x")], **kwargs)


# --- resuming a run ----------------------------------------------------------------------------


async def test_a_resumed_adaptive_run_learns_from_the_earlier_reports(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    bank = [Task(query=i, id=f"i{i}", metadata={"difficulty": i / 10 - 1}) for i in range(20)]
    first = AdaptiveQueue(bank, budget=5)
    await Agents(max_concurrent_tasks=1).run(queue=first, results_path=path)
    second = AdaptiveQueue(bank, budget=10)
    reports = await Agents(max_concurrent_tasks=1).run(queue=second, results_path=path, resume=True)
    assert second.n_observations == first.n_observations + len(reports)
    assert {r["task_id"] for r in reports}.isdisjoint(set(h[0] for h in first.summary()["history"]))
