"""Computerized adaptive testing: give the item that tells most about the ability, stop when sure.

`AdaptiveQueue` models each task as an item of a two-parameter logistic (2PL) IRT model, with
P(correct | θ) = 1 / (1 + exp(-a (θ - b))), difficulty b = `metadata["difficulty"]` and
discrimination a = `metadata["discrimination"]`. The ability θ is estimated by EAP (the posterior
mean under a normal prior, on a fixed quadrature grid), each next item is the pending one with the
most Fisher information at that estimate, and issuing stops once the posterior standard deviation
falls below `se_threshold`, the budget is spent, or the bank is empty.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import TaskSpecError
from .queues import TaskQueue
from .report import eval_score
from .task import Task, as_task

Score = Callable[[Mapping[str, Any]], float | None]


def _softplus(x: float) -> float:
    """log(1 + exp(x)) without overflow for large x or loss of precision for very negative x."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def probability_correct(theta: float, a: float, b: float) -> float:
    """The 2PL chance of a correct answer at ability `theta`; never overflows for extreme inputs."""
    z = a * (theta - b)
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def item_information(theta: float, a: float, b: float) -> float:
    """Fisher information a²·P·(1−P) of a 2PL item at `theta`; largest where theta equals b."""
    p = probability_correct(theta, a, b)
    return a * a * p * (1.0 - p)


def default_score(report: Mapping[str, Any]) -> float | None:
    """A report's score in [0, 1], or None when the report says nothing about the ability.

    None unless `status` is "success". Among the `eval` entries, those with a boolean "passed" win
    (1.0 if all passed, else 0.0); otherwise the mean of numeric "score" values in [0, 1] (others,
    such as a 1-10 rating, are ignored); None when `eval` is missing or has neither.
    """
    if report.get("status") != "success":
        return None
    return eval_score(report.get("eval"))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class _Item:
    task: Task
    a: float
    b: float


class AdaptiveQueue(TaskQueue):
    """Issues tasks one by one by maximum Fisher information at the current EAP ability estimate.

    The whole bank is read up front (the choice needs every item); ids must be unique. Items are
    never issued twice, even if their result never comes. Each finished repetition with a non-None
    score is one observation; several repetitions of an item add several. Once `next_task` returns
    None or `should_continue` returns False the queue stays stopped, and `stop_reason` keeps the
    first reason: "se_threshold", "budget" or "exhausted". Results of items still in flight when it
    stops still update the estimate. The grid covers prior_mean ± grid_span·prior_sd, so an ability
    beyond it is reported near its edge.
    """

    def __init__(
        self,
        tasks: Iterable[Task | Mapping[str, Any]],
        *,
        se_threshold: float = 0.3,
        budget: int | None = None,
        prior_mean: float = 0.0,
        prior_sd: float = 1.0,
        default_difficulty: float = 0.0,
        default_discrimination: float = 1.0,
        score: Score | None = None,
        grid_points: int = 121,
        grid_span: float = 6.0,
    ) -> None:
        _check_options(
            se_threshold,
            budget,
            prior_mean,
            prior_sd,
            default_difficulty,
            default_discrimination,
            score,
            grid_points,
            grid_span,
        )
        self._se_threshold = float(se_threshold)
        self._budget = budget
        self._prior_mean = float(prior_mean)
        self._prior_sd = float(prior_sd)
        self._score: Score = default_score if score is None else score

        self._items, self._index = _items(tasks, default_difficulty, default_discrimination)
        self._pending: list[int] = list(range(len(self._items)))  # in the given order

        low, high = prior_mean - grid_span * prior_sd, prior_mean + grid_span * prior_sd
        step = (high - low) / (grid_points - 1)
        self._grid = [low + i * step for i in range(grid_points)]
        self._log_posterior = [-0.5 * ((t - prior_mean) / prior_sd) ** 2 for t in self._grid]

        self._ability = self._prior_mean
        self._standard_error = self._prior_sd
        self._stop_reason: str | None = None
        self._n_issued = 0
        self._history: list[tuple[str, float, float, float]] = []

    @property
    def ability(self) -> float:
        """The EAP estimate of θ (posterior mean); `prior_mean` before any observation."""
        return self._ability

    @property
    def standard_error(self) -> float:
        """The posterior standard deviation of θ; `prior_sd` before any observation."""
        return self._standard_error

    @property
    def stop_reason(self) -> str | None:
        """Why issuing stopped ("se_threshold", "budget", "exhausted"), or None while it goes on."""
        return self._stop_reason

    @property
    def n_observations(self) -> int:
        """How many scored repetitions entered the estimate (None scores are not counted)."""
        return len(self._history)

    @property
    def n_issued(self) -> int:
        """How many items `next_task` has handed out, finished or still in flight."""
        return self._n_issued

    def summary(self) -> dict[str, Any]:
        """Estimate, counts, stop reason and each observation as (task_id, a, b, score)."""
        return {
            "ability": self._ability,
            "standard_error": self._standard_error,
            "stop_reason": self._stop_reason,
            "n_observations": self.n_observations,
            "n_issued": self._n_issued,
            "history": list(self._history),
        }

    def next_task(self) -> Task | None:
        """The pending item most informative at the current estimate (earliest one on ties).

        Calls with results still outstanding see the same estimate, so they hand out the next most
        informative items in turn. None, for good, once the queue has stopped.
        """
        if self._update_stop() is not None:
            return None
        theta = self._ability
        best_position, best_info = 0, -1.0
        for position, index in enumerate(self._pending):
            item = self._items[index]
            info = item_information(theta, item.a, item.b)
            if info > best_info:
                best_position, best_info = position, info
        item = self._items[self._pending.pop(best_position)]
        self._n_issued += 1
        return item.task

    def on_task_complete(self, task: Task, report: Mapping[str, Any]) -> None:
        """Add the repetition's score as an observation (a None score is ignored).

        A fractional score u counts as partial credit, u·log P + (1−u)·log(1−P). Raises
        ValueError for a task this queue did not issue, or a score outside [0, 1].
        """
        index = self._index.get(task.id)
        if index is None or index in self._pending:
            raise ValueError(f"task {task.id!r} was not issued by this adaptive queue")
        value = self._score(report)
        if value is None:
            return
        if not (_is_number(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"score for task {task.id!r} must be in [0, 1] or None, got {value!r}")
        u = float(value)
        item = self._items[index]
        for i, theta in enumerate(self._grid):
            z = item.a * (theta - item.b)
            # log P = -softplus(-z), log(1 - P) = -softplus(z)
            self._log_posterior[i] -= u * _softplus(-z) + (1.0 - u) * _softplus(z)
        self._history.append((task.id, item.a, item.b, u))
        self._refresh_estimate()

    def should_continue(self) -> bool:
        """False (for good) once SE < se_threshold, the budget is spent or no item is pending."""
        return self._update_stop() is None

    def _update_stop(self) -> str | None:
        if self._stop_reason is None:
            if self._standard_error < self._se_threshold:
                self._stop_reason = "se_threshold"
            elif self._budget is not None and self._n_issued >= self._budget:
                self._stop_reason = "budget"
            elif not self._pending:
                self._stop_reason = "exhausted"
        return self._stop_reason

    def _refresh_estimate(self) -> None:
        peak = max(self._log_posterior)
        weights = [math.exp(lp - peak) for lp in self._log_posterior]
        total = math.fsum(weights)
        mean = math.fsum(w * t for w, t in zip(weights, self._grid, strict=True)) / total
        variance = (
            math.fsum(w * (t - mean) ** 2 for w, t in zip(weights, self._grid, strict=True)) / total
        )
        self._ability = mean
        self._standard_error = math.sqrt(max(variance, 0.0))


def _parameter(task: Task, key: str, default: float, *, positive: bool) -> float:
    """An item parameter from the task's metadata (or `default`), checked finite (and > 0)."""
    value = task.metadata.get(key, default)
    if not _is_number(value) or (positive and value <= 0):
        need = "a finite number > 0" if positive else "a finite number"
        raise TaskSpecError(f"task {task.id!r}: metadata {key!r} must be {need}, got {value!r}")
    return float(value)


def _check_options(
    se_threshold: float,
    budget: int | None,
    prior_mean: float,
    prior_sd: float,
    default_difficulty: float,
    default_discrimination: float,
    score: Score | None,
    grid_points: int,
    grid_span: float,
) -> None:
    """Refuse a bad AdaptiveQueue option with a ValueError naming it and the value."""
    _check(
        _is_number(se_threshold) and se_threshold > 0,
        f"se_threshold must be > 0, got {se_threshold!r}",
    )
    if budget is not None:
        _check(
            isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1,
            f"budget must be an integer >= 1 or None, got {budget!r}",
        )
    _check(_is_number(prior_mean), f"prior_mean must be a finite number, got {prior_mean!r}")
    _check(_is_number(prior_sd) and prior_sd > 0, f"prior_sd must be > 0, got {prior_sd!r}")
    _check(
        _is_number(default_difficulty),
        f"default_difficulty must be a finite number, got {default_difficulty!r}",
    )
    _check(
        _is_number(default_discrimination) and default_discrimination > 0,
        f"default_discrimination must be > 0, got {default_discrimination!r}",
    )
    _check(
        isinstance(grid_points, int) and not isinstance(grid_points, bool) and grid_points >= 11,
        f"grid_points must be an integer >= 11, got {grid_points!r}",
    )
    _check(_is_number(grid_span) and grid_span > 0, f"grid_span must be > 0, got {grid_span!r}")
    _check(score is None or callable(score), f"score must be callable or None, got {score!r}")


def _items(
    tasks: Iterable[Task | Mapping[str, Any]], difficulty: float, discrimination: float
) -> tuple[list[_Item], dict[str, int]]:
    """The bank's items in the given order, and each task id's index; a repeated id is refused."""
    items: list[_Item] = []
    index: dict[str, int] = {}
    for task in map(as_task, tasks):
        if task.id in index:
            raise TaskSpecError(f"task id {task.id!r} appears twice")
        b = _parameter(task, "difficulty", difficulty, positive=False)
        a = _parameter(task, "discrimination", discrimination, positive=True)
        index[task.id] = len(items)
        items.append(_Item(task, a, b))
    return items, index
