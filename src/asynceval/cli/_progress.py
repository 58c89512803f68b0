"""The live view of a run: a rich panel on a terminal, plain periodic lines elsewhere.

It learns what happens from asynceval's events (an observer: retries, timeouts, finished
repetitions) and from the controller (calls in flight, calls queued). Its total is the pairs
(task, repeat) this run has to run: on `--resume`, those not already in the results file. Its ETA
counts down from the estimate made at the last finished repetition and says `unknown` once past
it (a hanging call), never 0 s while repetitions still run.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..engine import Task, successful_pairs
from ..errors import TaskSpecError
from ..limits import ConcurrencyController

Mode = Literal["live", "plain", "quiet"]


def _duration(seconds: float | None, round_up: bool = False) -> str:
    if seconds is None:
        return "unknown"
    seconds = math.ceil(seconds) if round_up else int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def already_done(results: Path, tasks: Iterable[Any], repeats: int) -> int | None:
    """How many pairs (task, repeat) of `tasks` x `repeats` the results file holds a success
    for: what a resumed run will not run again. None when `tasks` cannot be counted without
    consuming it (a stream) or a task is not valid (the run itself says so)."""
    if not hasattr(tasks, "__len__"):
        return None
    try:
        ids = {t.id if isinstance(t, Task) else Task.from_dict(t).id for t in tasks}
        pairs = successful_pairs(results)
    except (TaskSpecError, OSError, TypeError, ValueError):
        return None
    return sum(1 for task_id, repeat in pairs if task_id in ids and 0 <= repeat < repeats)


class Progress:
    """Counts a run's progress; `observe` is an events observer, `show` the refresh loop."""

    def __init__(
        self,
        controller: ConcurrencyController,
        total: int | None,
        mode: Mode,
        stream: TextIO,
        plain_every: float = 5.0,
        already_done: int | None = None,
        over_tasks: bool = False,
    ) -> None:
        """`total`: the pairs (task, repeat) of the run's tasks, None if unknown;
        `already_done`: how many of them a resumed run's results file holds already (see
        `already_done()`); None: taken from the `run_started` event's `resumed_pairs`;
        `over_tasks`: the pass rate shown is the mean over tasks of their mean scores, as the
        summary's is under adaptive repeats (their repetitions are spread unevenly)."""
        self.controller = controller
        self.total = total if total is None or already_done is None else total - already_done
        self._total_known = already_done is not None
        if self.total is not None and self.total < 0:  # more done than the tasks hold
            self.total = None
        self._finish_by: float | None = None  # when the last estimate said the run would end
        self.threads_still_running = 0
        self.store_failures: dict[str, int] = {}  # what the disk refused to keep
        # The calls (and their cost) no repetition counted: `calls_outside_repetitions`.
        self.outside: tuple[int, float | None] | None = None
        self.scored = 0
        self.passed = 0.0
        self.over_tasks = over_tasks
        self.task_scores: dict[str, list[float]] = {}  # task -> [score sum, scored] (over_tasks)
        self.mode = mode
        self.stream = stream
        self.plain_every = plain_every
        self.statuses: Counter[str] = Counter()
        self.remote_in_flight: int | None = None  # calls out on cluster workers (their events)
        self.retries = 0
        self.timeouts = 0  # LLM call attempts that ran out of time
        self.task_timeouts = 0  # repetitions that ended as task_timeout
        self.started = time.monotonic()
        self.stream_error: OSError | None = None
        self.cost = 0.0  # what the released requests and collected batches cost so far
        self.priced = False
        self.open_batches: dict[str, str] = {}  # batch id -> the provider's last status
        self.batches_done = 0
        self.batch_lines = 0  # lines in the open batches

    def observe(self, event: str, fields: Mapping[str, Any]) -> None:
        if event == "run_started" and self.total is not None and not self._total_known:
            # Done in an earlier run; pairs outside this run's tasks may be among them, so a
            # count above the total says only that the total is unknown.
            left = self.total - int(fields.get("resumed_pairs") or 0)
            self.total = left if left >= 0 else None
        elif event == "task_finished":  # once per repetition, after its last attempt
            status = str(fields.get("status"))
            self.statuses[status] += 1
            self._estimate()
            score = fields.get("score")
            if isinstance(score, int | float):  # scored as the summary scores it
                self.scored += 1
                self.passed += float(score)
                if self.over_tasks:
                    task = self.task_scores.setdefault(str(fields.get("task_id")), [0.0, 0])
                    task[0] += float(score)
                    task[1] += 1
            self.task_timeouts += status == "task_timeout"
        elif event in ("acquired", "released") and "worker" in fields:
            step = 1 if event == "acquired" else -1
            self.remote_in_flight = max(0, (self.remote_in_flight or 0) + step)
            if event == "released":
                self._cost(fields)
        elif event == "released":
            self._cost(fields)
        elif event.startswith("batch_"):
            self._batch(event, fields)
        elif event == "retry":
            self.retries += 1
        elif event == "timeout":
            self.timeouts += 1
        elif event == "calls_outside_repetitions":
            cost = fields.get("cost_usd")
            priced = float(cost) if isinstance(cost, int | float) else None
            self.outside = (int(fields.get("calls") or 0), priced)
        elif event == "run_finished":
            self.threads_still_running = int(fields.get("threads_still_running") or 0)
            failures = fields.get("store_failures")
            if isinstance(failures, Mapping):
                self.store_failures = {k: int(v or 0) for k, v in failures.items() if v}

    def _cost(self, fields: Mapping[str, Any]) -> None:
        cost = fields.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost += float(cost)
            self.priced = True

    def _batch(self, event: str, fields: Mapping[str, Any]) -> None:
        """The batch lane's batches: open ones by status, lines waiting in them, done ones."""
        batch_id = str(fields.get("batch_id"))
        if event == "batch_submitted" or (
            event == "batch_reattached" and fields.get("batch_id") is not None
        ):  # a resume's re-attached batch is open again, its lines waiting
            self.open_batches[batch_id] = "submitted" if event == "batch_submitted" else "resumed"
            self.batch_lines += int(fields.get("requests") or 0)
        elif event == "batch_progress" and batch_id in self.open_batches:
            self.open_batches[batch_id] = str(fields.get("status"))
        elif event == "batch_completed":
            if self.open_batches.pop(batch_id, None) is not None:
                self.batches_done += 1
                done = sum(
                    int(fields.get(k) or 0)
                    for k in ("succeeded", "errored", "expired", "cancelled")
                )
                self.batch_lines = max(0, self.batch_lines - done)
            self._cost(fields)

    def batches(self) -> str | None:
        """The batches, as the display says them ("2 open (in_progress 2), 340 lines waiting,
        5 done"), or None before the first."""
        if not self.open_batches and not self.batches_done:
            return None
        states = Counter(self.open_batches.values())
        detail = ", ".join(f"{state} {n}" for state, n in sorted(states.items()))
        opened = f"{len(self.open_batches)} open" + (f" ({detail})" if detail else "")
        return f"{opened}, {self.batch_lines} lines waiting, {self.batches_done} done"

    @property
    def done(self) -> int:
        return sum(self.statuses.values())

    def _estimate(self) -> None:
        """At a repetition's end: when the rest will be done at the pace so far."""
        now = time.monotonic()
        done = self.done
        if self.total is not None and done:
            self._finish_by = now + max(0, self.total - done) * (now - self.started) / done

    def figures(self) -> dict[str, Any]:
        """The numbers the views show. The ETA counts down to the last estimate; past it, with
        repetitions still to finish (a call hanging), it is unknown (None), not 0."""
        now = time.monotonic()
        elapsed = now - self.started
        done = self.done
        total = self.total if self.total is not None and self.total >= done else None
        eta = None
        if total is not None and done >= total:
            eta = 0.0
        elif total is not None and self._finish_by is not None and self._finish_by > now:
            eta = self._finish_by - now
        stats = self.controller.statistics()
        return {
            "done": done,
            "total": total,
            "in_flight": stats.active if self.remote_in_flight is None else self.remote_in_flight,
            "limit": stats.limit,
            "queued": stats.waiting,
            "retries": self.retries,
            "timeouts": self.timeouts,
            "task_timeouts": self.task_timeouts,
            "pass_rate": self.pass_rate(),
            "scored": self.scored,
            "elapsed": elapsed,
            "eta": eta,
        }

    def pass_rate(self) -> float | None:
        """The pass rate so far: over the scored repetitions, or with `over_tasks` the mean of
        the tasks' mean scores; None before the first scored repetition."""
        if not self.scored:
            return None
        if not self.over_tasks:
            return self.passed / self.scored
        means = [total / count for total, count in self.task_scores.values()]
        return math.fsum(means) / len(means)

    def _rate_text(self, f: Mapping[str, Any]) -> str:
        if f["pass_rate"] is None:
            return "-"
        if self.over_tasks:
            tasks = len(self.task_scores)
            return f"{f['pass_rate']:.1%} over {tasks} tasks ({f['scored']} scored)"
        return f"{f['pass_rate']:.1%} of {f['scored']} scored"

    def line(self) -> str:
        f = self.figures()
        total = "" if f["total"] is None else f"/{f['total']}"
        rate = self._rate_text(f)
        batches = self.batches()
        return (
            f"[{_duration(f['elapsed'])}] done {f['done']}{total} | in flight "
            f"{f['in_flight']}/{f['limit']} | queued calls {f['queued']} | retries {f['retries']}"
            f" | timeouts {f['timeouts']} calls, {f['task_timeouts']} tasks | pass rate {rate}"
            + (f" | batches {batches}" if batches else "")
            + (f" | cost ${self.cost:.4g}" if self.priced else "")
            + f" | ETA {_duration(f['eta'], round_up=True)}"
        )

    def table(self) -> Table:
        f = self.figures()
        table = Table(title="asynceval run", show_header=False, expand=False)
        table.add_column(style="bold")
        table.add_column()
        total = "" if f["total"] is None else f"/{f['total']}"
        table.add_row("done", f"{f['done']}{total}")
        table.add_row("LLM calls in flight", f"{f['in_flight']} / {f['limit']}")
        table.add_row("calls queued", str(f["queued"]))
        table.add_row("retries", str(f["retries"]))
        table.add_row("timeouts", f"{f['timeouts']} calls, {f['task_timeouts']} tasks")
        rate = self._rate_text(f)
        table.add_row("pass rate so far", rate)
        batches = self.batches()
        if batches:
            table.add_row("batches", batches)
        if self.priced:
            table.add_row("cost so far", f"${self.cost:.4g}")
        eta = _duration(f["eta"], round_up=True)
        table.add_row("elapsed / ETA", f"{_duration(f['elapsed'])} / {eta}")
        return table

    async def show(self) -> None:
        """Refresh until cancelled; the last state is left on screen. A stream that refuses a
        line (stdout to a full disk, say) ends the display, not the run: the run's files are its
        record, and the error is kept in `stream_error` for the end of the run to report."""
        try:
            await self._show()
        except OSError as exc:
            self.stream_error = exc

    async def _show(self) -> None:
        if self.mode == "quiet":
            await anyio.sleep_forever()
        if self.mode == "plain":
            try:
                while True:
                    await anyio.sleep(self.plain_every)
                    print(self.line(), file=self.stream, flush=True)
            finally:
                print(self.line(), file=self.stream, flush=True)
        console = Console(file=self.stream)
        with Live(self.table(), console=console, auto_refresh=False) as live:
            try:
                while True:
                    await anyio.sleep(0.25)
                    live.update(self.table(), refresh=True)
            finally:
                live.update(self.table(), refresh=True)
