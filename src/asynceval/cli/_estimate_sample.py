"""`asynceval estimate`'s sample: n of a run's (task, repeat) pairs, each equally likely.

The run is every task of its task source times `n_task_repeats`: N = T tasks x R repeats pairs.
The engine runs every task it is given `n_task_repeats` times and cannot be told to run chosen
pairs; but a task's repetitions are exchangeable (the same task, agents and prompts; only their
index differs, and what a repetition costs does not depend on it), so which of a task's pairs
are drawn does not matter, only how many. The sample is therefore drawn over tasks:

- n < T: a simple random sample of n tasks, one repetition each (reservoir sampling, Li's
  algorithm L: the tasks are read once, however many there are, and only n are held, so a
  file of a million tasks streams through);
- T <= n < N: every task n // T times, and n mod T tasks, drawn at random, once more;
- n >= N: the whole run.

Every pair has the same chance, n / N, to be in the sample, so the sample's mean per
repetition times N is an unbiased estimate of the run's total, as for a simple random sample
of pairs. Spreading the sample evenly over the tasks, instead of leaving it to chance that one
task gets three repetitions and another none, removes the between-task part of its variance
(the large part when a few tasks are slow or long, as in examples/multi_turn.py); the interval
of a simple random sample (`_estimate_stats`) is then on the safe side.

The sample keeps the order of the task source (so that the sample run, and the replay of it
that projects the run's wall time, meet the tasks as the run's queue would). A task run k times
in the sample is run as k copies of itself with 1 repeat each: the first
under its own id, the others as `ID#estimate-2`, `ID#estimate-3`, ... (ids of their own, as a
run's reports and events need).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine import Task
from ..engine.task import as_task

COPY_MARK = "#estimate-"
"""What separates a task's id from the number of its copy in the sample run."""


@dataclass(frozen=True)
class Sample:
    """The sampled tasks to run (copies included, 1 repeat each) and the run they come from."""

    tasks: list[Task]
    run_tasks: int
    repeats: int

    @property
    def population(self) -> int:
        """The run's repetitions: tasks x repeats."""
        return self.run_tasks * self.repeats


def draw(
    tasks: Iterable[Task | Mapping[str, Any]], repeats: int, size: int, rng: random.Random
) -> Sample:
    """`size` of the pairs of `tasks` x `repeats` (all of them when the run has fewer), as
    tasks to run once each."""
    chosen, count = _reservoir(tasks, size, rng)
    if count <= size:  # every task is in: each as often as the size allows, the rest at random
        times, extra = divmod(size, count) if count else (0, 0)
        if times >= repeats:
            times, extra = repeats, 0
        more = set(rng.sample(range(count), extra))
        picked = [task for i, task in enumerate(chosen) for _ in range(times + (i in more))]
    else:
        picked = chosen
    return Sample(_copies(picked), count, repeats)


def _reservoir(
    tasks: Iterable[Task | Mapping[str, Any]], size: int, rng: random.Random
) -> tuple[list[Task], int]:
    """A simple random sample of `size` tasks (all of them when there are fewer) in the order
    of `tasks`, drawn in one pass, and how many tasks there were."""
    chosen: list[tuple[int, Task]] = []
    count = 0
    weight = math.exp(math.log(_uniform(rng)) / size)
    take = size + _skip(weight, rng)  # the index of the next task that enters the reservoir
    for index, item in enumerate(tasks):
        count = index + 1
        if index < size:
            chosen.append((index, as_task(item)))
        elif index == take:
            chosen[rng.randrange(size)] = (index, as_task(item))
            weight *= math.exp(math.log(_uniform(rng)) / size)
            take += 1 + _skip(weight, rng)
    return [task for _, task in sorted(chosen, key=lambda pair: pair[0])], count


def _uniform(rng: random.Random) -> float:
    """A uniform draw in (0, 1): never 0, whose logarithm is -inf."""
    return rng.random() or 0.5


def _skip(weight: float, rng: random.Random) -> int:
    """How many tasks algorithm L passes over before the next one enters the reservoir."""
    if weight >= 1.0:
        return 0
    if weight <= 0.0:
        return 2**62
    return math.floor(math.log(_uniform(rng)) / math.log1p(-weight))


def _copies(chosen: list[Task]) -> list[Task]:
    """The sampled tasks with a task drawn k times as k copies under ids of their own."""
    seen: dict[str, int] = {}
    out: list[Task] = []
    for task in chosen:
        number = seen[task.id] = seen.get(task.id, 0) + 1
        if number == 1:
            out.append(task)
        else:
            out.append(dataclasses.replace(task, id=f"{task.id}{COPY_MARK}{number}"))
    return out
