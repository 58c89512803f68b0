"""Adaptive repeats against fixed repeats: repetitions to reach a task-set half-width of 0.03.

40 tasks with known pass probabilities: 10 always pass, 10 never do (as many real tasks), 20
pass with probabilities spread evenly over [0.1, 0.9]. Each outcome is a seeded coin flip; the
rule is the engine's own (`asynceval.engine._adaptive_repeats.RepeatAllocator`, what `asynceval
run --repeats auto` runs), driven here without the engine (no agents, no LLM): one repetition per
task, then one at a time where the rule says (or with K in flight, finished oldest first, as a run
with K concurrent repetitions does), until the reported half-width is <= W or every task has
max_repeats.

Printed per seed and as medians: the repetitions the rule needed, the half-width it reported,
the true half-width of its allocation (z * sqrt(sum p_i (1 - p_i) / n_i) / T from the known
probabilities), and the fixed repeat counts to compare with: the smallest whose true half-width
is <= W, the smallest whose reported half-width (same prior) is <= W on the same seed, and the
issue's 12 (480 repetitions).

    .venv/bin/python benchmarks/adaptive_repeats.py
    .venv/bin/python benchmarks/adaptive_repeats.py --seeds 21 --in-flight 16 --width 0.03
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections import deque

from asynceval import AdaptiveRepeats
from asynceval.engine._adaptive_repeats import RepeatAllocator
from asynceval.engine.statistics import Z_95, stratified_half_width

PROBABILITIES = [1.0] * 10 + [0.0] * 10 + [0.1 + 0.8 * i / 19 for i in range(20)]
ISSUE_FIXED = 12


def true_half_width(repeats: list[int]) -> float:
    total = sum(p * (1 - p) / n for p, n in zip(PROBABILITIES, repeats, strict=True))
    return Z_95 * math.sqrt(total) / len(PROBABILITIES)


def adaptive(seed: int, rule: AdaptiveRepeats, in_flight: int) -> dict[str, float]:
    """The rule over the 40 tasks with at most `in_flight` repetitions running at once."""
    draws = random.Random(seed)
    allocator = RepeatAllocator(rule)
    tasks = [allocator.add() for _ in PROBABILITIES]
    running: deque[int] = deque()

    def finish_oldest() -> None:
        index = running.popleft()
        allocator.finish(index, float(draws.random() < PROBABILITIES[index]))

    for index in tasks:  # the first repetition of each task, as the queue gives them
        if len(running) == in_flight:
            finish_oldest()
        allocator.start(index)
        running.append(index)
    while True:
        chosen = allocator.choose() if len(running) < in_flight else None
        if chosen is not None:
            allocator.start(chosen)
            running.append(chosen)
        elif running:
            finish_oldest()
        else:
            break
    outcome = allocator.outcome()
    repeats = [allocator.repetitions(i) for i in tasks]
    return {
        "repetitions": outcome["repetitions"],
        "reported": outcome["half_width"],
        "true": true_half_width(repeats),
        "always_or_never": statistics.mean(repeats[:20]),
        "spread": statistics.mean(repeats[20:]),
        "stopped": outcome["stopped"] == "ci_width_reached",
    }


def fixed_reported(seed: int, width: float, prior: tuple[float, float]) -> int:
    """The smallest fixed repeat count whose reported half-width is <= `width` on this seed."""
    for n in range(1, 200):
        draws = random.Random(seed + 10_000)
        passes = [sum(draws.random() < p for _ in range(n)) for p in PROBABILITIES]
        if stratified_half_width([(float(s), n) for s in passes], prior=prior) <= width:
            return n
    raise AssertionError("never reached")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=float, default=0.03)
    parser.add_argument("--max-repeats", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=11)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    rule = AdaptiveRepeats(ci_width=args.width, max_repeats=args.max_repeats)
    T = len(PROBABILITIES)
    fixed_true = next(n for n in range(1, 200) if true_half_width([n] * T) <= args.width)
    fixed_rep = statistics.median(
        fixed_reported(s, args.width, rule.prior) for s in range(args.seeds)
    )
    print(
        f"{T} tasks (10 always pass, 10 never, 20 with p spread over [0.1, 0.9]); W = "
        f"{args.width}; prior Beta{rule.prior}; max_repeats {args.max_repeats}; {args.seeds} seeds"
    )
    print(
        f"fixed repeats reaching W: true half-width {fixed_true} ({fixed_true * T} repetitions); "
        f"reported half-width, median {fixed_rep:g} ({fixed_rep * T:g}); the issue's "
        f"{ISSUE_FIXED} ({ISSUE_FIXED * T})"
    )
    for k in args.in_flight:
        runs = [adaptive(seed, rule, k) for seed in range(args.seeds)]
        for seed, run in enumerate(runs):
            print(
                f"  in flight {k:>2} seed {seed:>2}: {run['repetitions']:>4.0f} repetitions, "
                f"reported {run['reported']:.4f}, true {run['true']:.4f} "
                f"(true/reported {run['true'] / run['reported']:.2f}), mean repeats "
                f"{run['always_or_never']:.1f} always/never, {run['spread']:.1f} spread"
            )
        reps = statistics.median(r["repetitions"] for r in runs)
        ratio = statistics.median(r["true"] / r["reported"] for r in runs)
        worst = max(abs(r["true"] / r["reported"] - 1) for r in runs)
        reached = sum(1 for r in runs if r["stopped"])
        print(
            f"in flight {k}: median {reps:g} repetitions; saving {1 - reps / (fixed_true * T):.0%}"
            f" against fixed {fixed_true}, {1 - reps / (fixed_rep * T):.0%} against fixed "
            f"{fixed_rep:g} (reported), {1 - reps / (ISSUE_FIXED * T):.0%} against the issue's "
            f"{ISSUE_FIXED}; true/reported half-width median {ratio:.2f} (worst off by "
            f"{worst:.0%}); reached W in {reached}/{len(runs)}"
        )


if __name__ == "__main__":
    main()
