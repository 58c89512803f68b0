"""`asynceval estimate`'s sample: n of a run's (task, repeat) pairs, each equally likely.

The run is every task of its task source times `n_task_repeats`: N = T tasks x R repeats pairs.
The engine runs every task it is given `n_task_repeats` times, as repeats 0, 1, ...; a task's
repetitions are exchangeable (the same task, agents and prompts; only their index differs, and
what a repetition costs does not depend on it), so which of a task's pairs are drawn does not
matter, only how many. The sample is therefore drawn over tasks, and run as the run itself
would run those pairs (their own ids and repeat numbers, so that `asynceval run --resume` on the
sample's directory skips them and runs only the rest):

- n < T: a simple random sample of n tasks, repeat 0 of each (reservoir sampling, Li's
  algorithm L: the tasks are read once, however many there are, and only n are held, so a file
  of a million tasks streams through);
- T <= n: every task k = min(R, n // T) times, repeats 0 to k - 1 (k T pairs: a sample larger
  than the tasks is rounded down to a whole number of repeats per task, so that each task has
  as many; the line before the sample runs says how many);
- n >= N: the whole run.

Every pair has the same chance to be in the sample (n / N, or k / R), so the sample's mean per
repetition times N is an unbiased estimate of the run's total, as for a simple random sample
of pairs. Spreading the sample evenly over the tasks, instead of leaving it to chance that one
task gets three repetitions and another none, removes the between-task part of its variance
(the large part when a few tasks are slow or long, as in examples/multi_turn.py); the interval
of a simple random sample (`_estimate_stats`) is then on the safe side.

The size of every task's query (`query_size`: characters of its text, or of its JSON) is read in
the same pass, for all of them: it is known for free, and it tells the estimate when the sample
holds no task like some of the run's (a few tasks with far longer prompts; `_estimate_stats`).

The sample keeps the order of the task source (so that the sample run, and the replay of it
that projects the run's wall time, meet the tasks as the run's queue would).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine import Task
from ..engine.task import as_task


@dataclass
class Sizes:
    """The query sizes of the run's tasks, read as they stream by: their sum, least and most."""

    total: float = 0.0
    least: float = math.inf
    most: float = 0.0

    def add(self, size: float) -> None:
        self.total += size
        self.least = min(self.least, size)
        self.most = max(self.most, size)


@dataclass(frozen=True)
class Sample:
    """The sampled tasks, each to run `repeats_each` times, and the run they come from."""

    tasks: list[Task]
    repeats_each: int
    run_tasks: int
    repeats: int
    sizes: Sizes = field(default_factory=Sizes)

    @property
    def population(self) -> int:
        """The run's repetitions: tasks x repeats."""
        return self.run_tasks * self.repeats

    @property
    def size(self) -> int:
        """The sample's repetitions."""
        return len(self.tasks) * self.repeats_each


def query_size(task: Task) -> float:
    """What a task's query weighs: the characters of its text, or of its JSON (at least 1)."""
    query = task.query
    if not isinstance(query, str):
        query = json.dumps(query, default=str, ensure_ascii=False)
    return float(max(1, len(query)))


def draw(
    tasks: Iterable[Task | Mapping[str, Any]], repeats: int, size: int, rng: random.Random
) -> Sample:
    """`size` of the pairs of `tasks` x `repeats` (all of them when the run has fewer; a whole
    number of repeats per task when `size` is at least the number of tasks)."""
    sizes = Sizes()
    chosen, count = _reservoir(_measured(tasks, sizes), size, rng)
    if count <= size:  # every task is in, each as often as the size allows
        each = min(repeats, size // count) if count else 0
        return Sample(chosen, each, count, repeats, sizes)
    return Sample(chosen, 1, count, repeats, sizes)


def _measured(tasks: Iterable[Task | Mapping[str, Any]], sizes: Sizes) -> Iterator[Task]:
    for item in tasks:
        task = as_task(item)
        sizes.add(query_size(task))
        yield task


def _reservoir(tasks: Iterable[Task], size: int, rng: random.Random) -> tuple[list[Task], int]:
    """A simple random sample of `size` tasks (all of them when there are fewer) in the order
    of `tasks`, drawn in one pass, and how many tasks there were."""
    chosen: list[tuple[int, Task]] = []
    count = 0
    weight = math.exp(math.log(_uniform(rng)) / size)
    take = size + _skip(weight, rng)  # the index of the next task that enters the reservoir
    for index, task in enumerate(tasks):
        count = index + 1
        if index < size:
            chosen.append((index, task))
        elif index == take:
            chosen[rng.randrange(size)] = (index, task)
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
