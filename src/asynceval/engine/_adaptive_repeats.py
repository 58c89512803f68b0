"""Adaptive repeats: spend repetitions where they narrow the pass rate's half-width most.

The rule (DESIGN section 18): every task gets one repetition first; then each further repetition
goes to the task whose extra repetition lowers sum_i v_i / n_i the most (v_i / n_i - v_i / (n_i+1),
v_i = p_i (1 - p_i) with p_i the Beta-prior posterior mean of the task's score, so a few identical
outcomes never give a variance of 0), until `stratified_half_width` over the task set is <= the
target or every task has `max_repeats`. Repetitions in flight count as though they had already
scored (n_i grows, v_i stays): the rule never starts more than it would need if they came back as
expected, and looks again when they do. State: a few numbers per task, a heap of candidates.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .statistics import Z_95, stratified_half_width

_Z = Z_95

CI_WIDTH_REACHED = "ci_width_reached"
MAX_REPEATS = "max_repeats"


@dataclass(frozen=True)
class AdaptiveRepeats:
    """Repeat tasks until the pass rate over the task set is known to +/- `ci_width`.

    Pass it to a run instead of a fixed `n_task_repeats`:
    `await bench.run(tasks, repeats=AdaptiveRepeats(ci_width=0.03, max_repeats=20))`. Each task
    runs once, then further repetitions go to the tasks whose results vary (a task that always
    passes gets few), until the 95% half-width of the pass rate over this task set, stratified by
    task, is <= `ci_width`, or every task has `max_repeats` repetitions. The half-width is the
    part of the uncertainty repeats can narrow; the between-task part only more tasks narrow.
    Why the run stopped is in `run_finished` (`adaptive`) and in `bench.adaptive_outcome`.
    Repetitions that ended in an error count toward `max_repeats`, not as outcomes.
    A task's variance is p (1 - p), p the posterior mean of its score under a Beta `prior`
    (default Beta(0.1, 0.1): U-shaped, as real tasks mostly pass or mostly fail; after k identical
    outcomes the other keeps a chance of 0.1 / (k + 0.2), never 0). A resume
    (`resume=True`) counts the repetitions already in the results file and goes on by the
    same rule; repeat indexes keep increasing per task (0, 1, 2, ...).
    """

    ci_width: float
    max_repeats: int = 20
    prior: tuple[float, float] = (0.1, 0.1)

    def __post_init__(self) -> None:
        width = self.ci_width
        if (
            isinstance(width, bool)
            or not isinstance(width, int | float)
            or not math.isfinite(width)
            or not 0.0 < width <= 0.5
        ):
            raise ConfigError(f"ci_width must be a number in (0, 0.5], got {width!r}")
        most = self.max_repeats
        if isinstance(most, bool) or not isinstance(most, int) or most < 2:
            raise ConfigError(f"max_repeats must be an integer >= 2, got {most!r}")
        prior = self.prior
        if (
            not isinstance(prior, tuple)
            or len(prior) != 2
            or not all(
                isinstance(x, int | float) and not isinstance(x, bool) and 0 < x < math.inf
                for x in prior
            )
        ):
            raise ConfigError(f"prior must be two positive numbers (a, b), got {prior!r}")

    def describe(self) -> dict[str, Any]:
        """What a results header and a manifest record of the rule."""
        return {
            "ci_width": self.ci_width,
            "max_repeats": self.max_repeats,
            "prior": list(self.prior),
        }


class RepeatAllocator:
    """The rule's state over one run: per task the score sum, scored and started repetitions and
    those in flight. `add` a task (with the outcomes it already has), `start` a repetition of the
    task `choose` names, `finish` it with its score (None: unscored); `choose` says None when no
    repetition should start now (the target is reached counting those in flight, or every task
    is at `max_repeats`); the rule is over when it says None with nothing in flight."""

    def __init__(self, rule: AdaptiveRepeats) -> None:
        self.rule = rule
        self._sums: list[float] = []
        self._scored: list[int] = []
        self._started: list[int] = []
        self._pending: list[int] = []
        self._terms: list[float] = []  # v_i / n_eff_i; inf while n_eff_i is 0; 0 when left out
        self._included: list[bool] = []  # in the half-width: has or may still get an outcome
        self._versions: list[int] = []
        self._heap: list[tuple[float, int, int]] = []  # (-gain, task, version)
        self._sum = 0.0  # of the finite terms
        self._zeros = 0  # tasks counted with no outcome yet, scored or in flight
        self._counted = 0  # tasks in the half-width (all but those at max with no outcome)
        self.in_flight = 0

    def __len__(self) -> int:
        return len(self._sums)

    def add(self, scores: Sequence[float | None] = ()) -> int:
        """A new task with the outcomes of repetitions it already has (a resume); its index."""
        index = len(self._sums)
        known = [min(1.0, max(0.0, s)) for s in scores if s is not None]
        self._sums.append(math.fsum(known))
        self._scored.append(len(known))
        self._started.append(len(scores))
        self._pending.append(0)
        self._terms.append(0.0)
        self._included.append(False)
        self._versions.append(0)
        self._update(index)
        return index

    def start(self, index: int) -> None:
        self._started[index] += 1
        self._pending[index] += 1
        self.in_flight += 1
        self._update(index)

    def finish(self, index: int, score: float | None) -> None:
        self._pending[index] -= 1
        self.in_flight -= 1
        if score is not None:
            self._sums[index] += min(1.0, max(0.0, score))
            self._scored[index] += 1
        self._update(index)

    def repetitions(self, index: int) -> int:
        """Repetitions of the task started so far (finished, in flight, or earlier)."""
        return self._started[index]

    def choose(self) -> int | None:
        """The task whose next repetition narrows the half-width most, or None."""
        if self._projected_width() <= self.rule.ci_width:
            return None
        heap = self._heap
        while heap:
            _, index, version = heap[0]
            if version == self._versions[index] and self._started[index] < self.rule.max_repeats:
                return index
            heapq.heappop(heap)
        return None

    def half_width(self) -> float:
        """The stratified 95% half-width from the finished outcomes (tasks at `max_repeats`
        with no scored outcome left out: nothing more can be learnt of them)."""
        return stratified_half_width(
            [(self._sums[i], self._scored[i]) for i in range(len(self)) if self._counts(i)],
            prior=self.rule.prior,
            z=_Z,
        )

    def outcome(self, stopped: str | None = None) -> dict[str, Any]:
        """Why the rule stopped (`stopped` overrides: "interrupted", "queue_stopped"), the
        half-width reached and the repetitions it took."""
        width = self.half_width()
        if stopped is None:
            stopped = CI_WIDTH_REACHED if width <= self.rule.ci_width else MAX_REPEATS
        return {
            "stopped": stopped,
            "half_width": round(width, 6) if math.isfinite(width) else None,
            "ci_width": self.rule.ci_width,
            "max_repeats": self.rule.max_repeats,
            "prior": list(self.rule.prior),
            "tasks": len(self),
            "repetitions": sum(self._started),
        }

    # --- internals ---------------------------------------------------------------------------

    def _counts(self, index: int) -> bool:
        return (
            self._scored[index] > 0
            or self._pending[index] > 0
            or self._started[index] < self.rule.max_repeats
        )

    def _projected_width(self) -> float:
        if self._zeros or not self._counted:
            return math.inf
        return _Z * math.sqrt(max(self._sum, 0.0)) / self._counted

    def _update(self, index: int) -> None:
        """Recompute the task's term in the projected sum and push its new gain."""
        old = self._terms[index]
        if self._included[index]:
            self._counted -= 1
            if math.isinf(old):
                self._zeros -= 1
            else:
                self._sum -= old
        counts = self._included[index] = self._counts(index)
        n_eff = self._scored[index] + self._pending[index]
        a, b = self.rule.prior
        p = (self._sums[index] + a) / (self._scored[index] + a + b)
        variance = p * (1.0 - p)
        term = 0.0
        if counts:
            self._counted += 1
            if n_eff == 0:
                term = math.inf
                self._zeros += 1
            else:
                term = variance / n_eff
                self._sum += term
        self._terms[index] = term
        self._versions[index] += 1
        if counts and self._started[index] < self.rule.max_repeats:
            gain = math.inf if n_eff == 0 else variance / (n_eff * (n_eff + 1))
            heapq.heappush(self._heap, (-gain, index, self._versions[index]))
