"""A run's adaptive repeats (DESIGN section 18) as the scheduler meets them: which repetition
starts next, what each outcome tells the rule, and what the run reports when it ends.

The fixed-repeats path of the scheduler (`asynceval.engine.scheduler.Run`) never comes here: a
run with `repeats=AdaptiveRepeats(...)` holds one `AdaptiveSchedule`, which reads the run's queue,
its ids seen, the reports of earlier segments and the repetitions done, and writes nothing of the
run but its `_stopped` flag's consequences (it returns None once the run stopped).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import TaskSpecError
from ._adaptive_repeats import AdaptiveRepeats, RepeatAllocator
from .repetition import Unit
from .report import eval_score
from .task import Task, duplicate_message

if TYPE_CHECKING:
    from .scheduler import Run


class AdaptiveSchedule:
    """A run's adaptive-repeats state: the rule, and per task (by index) the Task, its agent
    data and its next repeat index."""

    def __init__(self, rule: AdaptiveRepeats) -> None:
        self.rule = rule
        self.most = rule.max_repeats
        self.allocator = RepeatAllocator(rule)
        self.queue_done = False
        self.tasks: list[Task] = []
        self.data: list[Mapping[str, Any]] = []
        self.next_idx: list[int] = []
        self.index: dict[str, int] = {}
        self.reports: dict[str, list[dict[str, Any]]] = {}  # only with callbacks (on_task_end)
        self.more = anyio.Event()
        self.outcome: dict[str, Any] | None = None

    async def next(self, run: Run) -> Unit | None:
        """The next repetition by the adaptive rule: a first repetition of each task the queue
        gives, then the repetitions the rule chooses; waits while those in flight may reach the
        target; None when the rule is over or the run stopped."""
        rule = self.allocator
        while True:
            if run._stopped:
                return None
            if not self.queue_done:
                task = run.queue.next_task()
                if task is None:
                    self.queue_done = True
                    continue
                position, fresh = await self._add(run, task)
                if fresh:
                    return self._unit(run, position)
                continue
            index = rule.choose()
            if index is not None:
                return self._unit(run, index)
            if not rule.in_flight:
                return None
            await self.more.wait()

    async def _add(self, run: Run, task: Task) -> tuple[int, bool]:
        """A task the queue gave: its place in the rule, and whether none of its repetitions
        was done in an earlier segment (its first one starts now)."""
        if not run._seen.add(task.id):
            raise TaskSpecError(duplicate_message(task.id, "tasks"))
        prior = self._prior_reports(run, task.id)
        for report in prior:  # done in an earlier run: the queue still learns from it
            run.queue.on_task_complete(task, report)
        position = self.allocator.add([eval_score(report.get("eval")) for report in prior])
        self.tasks.append(task)
        self.data.append(run._agent_data_for(task))
        self.next_idx.append(0)
        self.index[task.id] = position
        if run.callbacks.callbacks:
            self.reports[task.id] = list(prior)
        await run.callbacks.fire("on_task_selected", run.bench, task, run.queue)
        await run.callbacks.fire("on_task_start", run.bench, task)
        return position, not prior

    def _prior_reports(self, run: Run, task_id: str) -> list[dict[str, Any]]:
        if not run._prior:
            return []
        pairs = ((task_id, r) for r in range(self.most))
        return [run._prior[pair] for pair in pairs if pair in run._prior]

    def _unit(self, run: Run, index: int) -> Unit:
        """A new repetition of task `index`, at its next repeat index not done yet."""
        task = self.tasks[index]
        repeat_idx = self.next_idx[index]
        while (task.id, repeat_idx) in run._done:
            repeat_idx += 1
        self.next_idx[index] = repeat_idx + 1
        self.allocator.start(index)
        return Unit(task, self.data[index], repeat_idx, time.monotonic())

    def recorded(self, unit: Unit, report: dict[str, Any]) -> None:
        """A repetition's outcome for the rule (its score; none for an error), and a wake-up
        for the workers waiting on it."""
        index = self.index[unit.task.id]
        scored = report["status"] in ("success", "evaluation_failed")
        self.allocator.finish(index, eval_score(report.get("eval")) if scored else None)
        if unit.task.id in self.reports:
            self.reports[unit.task.id].append(report)
        self.more.set()
        self.more = anyio.Event()

    async def tasks_end(self, run: Run) -> None:
        """`on_task_end` for each task once the rule is over (it cannot be known before)."""
        for task in self.tasks:
            if task.id in self.reports:
                reports = self.reports.pop(task.id)
                await run.callbacks.fire("on_task_end", run.bench, task, reports)

    def fields(self, run: Run, interrupted: bool) -> dict[str, Any]:
        """run_finished's `adaptive`: why the rule stopped, its half-width, its repetitions."""
        stopped: str | None = None
        if interrupted:
            stopped = "interrupted"
        elif run._queue_error is not None or run._stopped:
            stopped = "queue_stopped"
        self.outcome = self.allocator.outcome(stopped)
        return {"adaptive": self.outcome}
