"""The scheduler: one run of a Benchmark, repetitions in an anyio task group.

At most `max_concurrent_tasks` repetitions are alive at once; the next task is pulled from the queue
only when one of them ends, so memory stays proportional to the concurrency, not to the number of
tasks, and an adaptive queue chooses with every result known so far. Each attempt of a repetition
runs under `anyio.fail_after(timeout)`; a timeout gives a task_timeout report with the traces so
far, then the task's TimeoutAction may run it once more. Infrastructure failures are re-run up to
`max_retries` times with exponential backoff.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from .. import _event_output, events
from ..errors import BackendLost, TaskSpecError
from ..funnel import CallJournal, journal_scope
from ..limits import ConcurrencyController, CostBudget, budget_scope
from ..runtime import RunGcThreshold
from ._adaptive_repeats import AdaptiveRepeats
from ._executors import RunScope, run_scope
from ._run_inputs import QueueArg, TaskSource, agent_data_resolver, checked_ids, make_queue
from ._run_setup import (
    adaptive_schedule,
    check_paths,
    check_resumable,
    results_held,
    run_attributes,
    run_header,
    run_key,
    runtime_for,
    store_failures,
)
from ._run_trace import RunTrace
from .backend import Backend, Session
from .callbacks import CallbackRunner
from .repetition import Repetitions, Unit
from .results import ResultsFile, read_header, successful_reports
from .run_cost import Cost, carried_budget, earlier_spend
from .run_paths import checked_run_id, journal_path, new_run_id, task_set_of, temporary_results
from .run_reports import RunReports, remove_file
from .seen_ids import SeenIds
from .task import duplicate_message
from .threads import ThreadRunner, threads_scope

if TYPE_CHECKING:
    from .benchmark import Benchmark


@dataclass
class _TaskState:
    remaining: int
    reports: list[dict[str, Any]] = field(default_factory=list)


class Run:
    """The state of one `Benchmark.run` call."""

    _outside: RunScope | None = None  # what its calls outside any repetition did (run_scope)

    def __init__(
        self,
        benchmark: Benchmark,
        *,
        tasks: TaskSource | None,
        queue: QueueArg,
        agent_data: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
        results_path: str | PathLike[str] | None,
        resume: bool,
        collect: bool,
        backend: Backend | None = None,
        run_id: str | None = None,
        journal: bool | None = None,
        repeats: AdaptiveRepeats | None = None,
        max_cost_usd: float | None = None,
    ) -> None:
        self.bench = benchmark
        self.adaptive = adaptive_schedule(repeats)
        self.backend = backend
        self.run_id = checked_run_id(run_id) if run_id is not None else new_run_id()
        self._session: Session | None = None
        self._backend_error: BackendLost | None = None
        self._cancel_all = anyio.CancelScope()
        self.runtime = runtime_for(benchmark)
        self.settings = self.runtime.settings
        self._max_cost_given = max_cost_usd  # a resume's new total; else the run's carries on
        total = self.settings.max_cost_usd if max_cost_usd is None else max_cost_usd
        self.budget = CostBudget(total) if total is not None else None
        self.cost = Cost()
        self.max_tasks = benchmark.max_concurrent_tasks or self.settings.max_concurrent_tasks
        self.n_tasks = len(tasks) if hasattr(tasks, "__len__") else None  # type: ignore[arg-type]
        tasks = checked_ids(tasks)
        # What a resume checks the results file against: which benchmark, which tasks.
        self.task_set = task_set_of(tasks) if results_path is not None else None
        self._agent_data_for = agent_data_resolver(tasks, agent_data)
        self.queue = make_queue(tasks, queue)
        self.results_path = results_path
        self.resume = resume
        check_paths(results_path, resume, journal)
        self.journal = results_path is not None if journal is None else journal
        self.collect = collect
        self.reports = RunReports.empty()
        self._temporary: str | None = None  # the results file of a run given none, if it collects
        self.counts: Counter[str] = Counter()
        self._calls_in_successes = 0  # LLM calls the successful repetitions recorded
        self.trace = RunTrace()  # OpenTelemetry: decided once, here
        self.repetitions = Repetitions(
            benchmark, self.settings, self.runtime.retry_policy, self.trace.telemetry
        )
        self.callbacks = CallbackRunner(benchmark.callbacks)
        self.threads = ThreadRunner(self.max_tasks)
        self._done: set[tuple[str, int]] = set()
        self._seen = SeenIds()  # 8 bytes an id: a generator of a million tasks stays flat
        self._task_states: dict[str, _TaskState] = {}
        self._pending: deque[Unit] = deque()
        self._stopped = False
        self._queue_error: Exception | None = None
        self._prior: dict[tuple[str, int], dict[str, Any]] = {}
        self._results: ResultsFile | None = None
        self._journal: CallJournal | None = None

    async def execute(self) -> RunReports:
        """Run to the end with the runtime bound, a portal for sync code and the run's threads;
        the connection pools the run opened are closed at its end."""
        if self.results_path is None:
            return await self._execute_bound()
        with results_held(self.results_path, self.settings):  # RunLocked: another run writes it
            return await self._execute_bound()

    async def _execute_bound(self) -> RunReports:
        runtime = self.runtime
        if self.resume and self.results_path is not None:  # the budget is the whole run's
            events_path = _event_output.events_path_for(self.results_path)
            earlier = await anyio.to_thread.run_sync(earlier_spend, events_path)
            self.cost.earlier = earlier.spent
            self.budget = carried_budget(self._max_cost_given, self.settings.max_cost_usd, earlier)
            self.bench.budget = self.budget
        events.ensure_logging(self.settings)
        token = runtime.bind()
        error: Exception | None = None
        try:
            async with runtime.pools.run_scope(), BlockingPortal() as portal:
                self.repetitions.portal = portal
                try:
                    with (
                        threads_scope(self.threads),
                        events.batching(),
                        events.bind_context(run_id=self.run_id),
                        RunGcThreshold(self.settings.run_gc_threshold),
                        budget_scope(self.budget),
                        self.trace.scope(self.run_id, runtime.limiter, run_attributes(self)),
                        run_scope(self.run_id) as self._outside,  # the user's threads' calls
                    ):
                        return await self._execute(runtime.limiter)
                except Exception as exc:  # raised as it is, not in the portal's exception group
                    error = exc
                finally:
                    self.repetitions.run_over.set()
                    await portal.stop(cancel_remaining=True)  # calls of abandoned threads
                    with anyio.CancelScope(shield=True):
                        await self.trace.flush()  # the run's spans exported before it returns
        finally:
            runtime.unbind(token)
            if self._temporary is not None and self.reports.path is None:  # failed: not returned
                remove_file(self._temporary)
        assert error is not None  # the block either returned or caught it
        raise error

    async def _execute(self, controller: ConcurrencyController) -> RunReports:
        settings = self.settings
        self.bench.registry.benchmark_config = self.bench.gather_config()
        if self.results_path is not None:
            header = await anyio.to_thread.run_sync(read_header, self.results_path)
            if self.resume:
                check_resumable(self, header)
                self._prior = await anyio.to_thread.run_sync(successful_reports, self.results_path)
                self._done = set(self._prior)
        started = time.monotonic()
        async with AsyncExitStack() as backend_stack:
            if self.journal and self.results_path is not None and self.backend is None:
                journal = CallJournal(journal_path(self.results_path), self.run_id)
                self._journal = journal
                await backend_stack.enter_async_context(journal)
                backend_stack.enter_context(journal_scope(journal))
            if self.backend is not None:
                # Backend hook (cost budget): the session keeps `self.budget` in step with the
                # cluster's (exhausted as soon as it is, what was spent by `flush_events`). Given
                # only to a budgeted run: a backend without budgets still runs the others.
                budget = {"budget": self.budget} if self.budget is not None else {}
                self._session = await backend_stack.enter_async_context(
                    self.backend.session(
                        self.bench, settings, self.max_tasks, run_key(self), **budget
                    )
                )
            return await self._execute_on(controller, started)

    async def _execute_on(self, controller: ConcurrencyController, started: float) -> RunReports:
        where = dict(self._session.description) if self._session is not None else {}
        events.run_started(
            limits=self._limits(controller),
            n_tasks=self.n_tasks,
            max_concurrent_tasks=self.max_tasks,
            n_task_repeats=self.bench.n_task_repeats,
            benchmark=type(self.bench).__qualname__,
            resumed_pairs=len(self._done),
            resumed=self.resume,
            **where,
        )
        interrupted = True
        try:
            async with AsyncExitStack() as stack:
                path = self.results_path
                if path is None and self.collect:  # the reports are returned from a file
                    path = self._temporary = temporary_results()
                if path is not None:
                    self._results = await stack.enter_async_context(
                        ResultsFile(
                            path,
                            run_header(self, controller),
                            self.runtime.writer,
                            keep_offsets=self.collect,
                        )
                    )
                await self.callbacks.fire("on_run_start", self.bench)
                await self._schedule()
            interrupted = False
        finally:
            if self._session is not None:  # the workers' last events come before run_finished
                with anyio.CancelScope(shield=True):
                    await self._session.flush_events()
            duration, cost = time.monotonic() - started, self._cost_fields()
            self.trace.finished(self.counts, duration, interrupted, cost)
            events.run_finished(
                counts=self.counts,
                duration_s=duration,
                interrupted=interrupted,
                written=self._results.written if self._results is not None else None,
                skipped_as_done=len(self._done),
                threads_still_running=self.threads.abandoned(),
                store_failures=store_failures(self),
                **cost,
                **(self.adaptive.fields(self, interrupted) if self.adaptive else {}),
            )
            if self.counts["success"] and not (self._calls_in_successes or self._calls_outside):
                events.no_llm_calls(successes=self.counts["success"])
            events.flush()  # the run's last lines are on disk before on_run_end
        if self.collect and self._results is not None:
            results = self._results
            self.reports = RunReports(
                results.path, results.offsets, temporary=self._temporary is not None
            )
        await self.callbacks.fire("on_run_end", self.bench, self.reports)
        return self.reports

    def _limits(self, controller: ConcurrencyController) -> dict[str, Any]:
        """The limits `run_started` states: the settings', with the controller's limit and the
        budget in force (a resumed run's total, which may not be MAX_COST_USD)."""
        budget = float(self.budget.limit) if self.budget is not None else None
        limit = controller.limit
        return {**self.settings.limits(), "max_concurrent_llm_calls": limit, "max_cost_usd": budget}

    def _cost_fields(self) -> dict[str, Any]:
        """`run_finished`'s cost fields, the calls no repetition counted included (from threads
        without a repetition's context, or made outside any), with their WARNING."""
        outside = self._outside
        if outside is not None:
            outside.warn()
            self.cost.add(outside.usage.as_dict())
        return self.cost.fields(self.budget)

    @property
    def _calls_outside(self) -> int:
        """The run's LLM calls that no repetition counted."""
        return self._outside.usage.llm_calls if self._outside is not None else 0

    @property
    def session(self) -> Session | None:
        """The backend's session while the run is on a backend, else None."""
        return self._session

    @property
    def journal_failures(self) -> int:
        """Answers the disk refused to the run's call journal."""
        return self._journal.store_failures if self._journal is not None else 0

    async def _schedule(self) -> None:
        """Start repetitions as slots free: `capacity` workers, each taking the next repetition
        when its last one ends (no task and no wake-up per repetition). A queue that fails stops
        new starts; the repetitions in flight still finish and are recorded, then its error is
        raised as it was."""
        workers = self._session.capacity if self._session is not None else self.max_tasks
        if self.n_tasks is not None:  # no more workers than repetitions (a huge limit is no cost)
            most = self.bench.n_task_repeats if self.adaptive is None else self.adaptive.most
            workers = max(1, min(workers, self.n_tasks * most))
        choosing = anyio.Lock(fast_acquire=True)  # one worker at a time asks the queue
        async with anyio.create_task_group() as tg:
            self._cancel_all = tg.cancel_scope
            for _ in range(workers):
                tg.start_soon(self._work, choosing)
        if self.adaptive is not None:
            await self.adaptive.tasks_end(self)
        if self._backend_error is not None:
            raise self._backend_error
        if self._queue_error is not None:
            raise self._queue_error

    async def _work(self, choosing: anyio.Lock) -> None:
        # Without callbacks, choosing never waits for anything: it cannot interleave with
        # another worker's, and the lock (a few microseconds a repetition) is not needed.
        alone = not self.callbacks.callbacks
        while True:
            if alone:
                unit = await self._choose()
            else:
                async with choosing:
                    unit = await self._choose()
            if unit is None:
                return
            await self.callbacks.fire(
                "on_task_repeat_start", self.bench, unit.task, unit.repeat_idx
            )
            report = await self._repetition(unit)
            if report is not None:
                await self._record(unit, report)
            # A repetition that never waited (an instant answer) must not keep the loop: others
            # (progress, a cancellation, the events written at the turn's end) get their turn.
            await anyio.lowlevel.checkpoint()

    async def _choose(self) -> Unit | None:
        """The next repetition, or None: none left, or the queue failed (nothing more starts
        then, not even the repeats of tasks already chosen), or the budget is exhausted."""
        if self.budget is not None and self.budget.exhausted:
            self._stopped = True
            return None
        try:
            if self.adaptive is not None:
                return await self.adaptive.next(self)
            return await self._next_unit()
        except Exception as exc:
            self._queue_error = self._queue_error or exc
            self._stopped = True
            self._pending.clear()
            return None

    async def _next_unit(self) -> Unit | None:
        """The next repetition to start: pending repeats first, then a task from the queue.

        Once the queue says stop, no new task starts, but the repeats of tasks already chosen do.
        """
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._stopped:
                return None
            task = self.queue.next_task()
            if task is None:
                return None
            if not self._seen.add(task.id):
                raise TaskSpecError(duplicate_message(task.id, "tasks"))
            repeats = range(self.bench.n_task_repeats)
            prior = [self._prior[p] for p in ((task.id, r) for r in repeats) if p in self._prior]
            for report in prior:  # done in an earlier run: the queue still learns from it
                self.queue.on_task_complete(task, report)
            if len(prior) == len(repeats):
                continue
            await self.callbacks.fire("on_task_selected", self.bench, task, self.queue)
            now = time.monotonic()
            data = self._agent_data_for(task)
            units = [
                Unit(task, data, repeat_idx, now)
                for repeat_idx in repeats
                if (task.id, repeat_idx) not in self._done
            ]
            self._task_states[task.id] = _TaskState(remaining=len(units), reports=prior)
            await self.callbacks.fire("on_task_start", self.bench, task)
            self._pending.extend(units)

    def _repetition(self, unit: Unit) -> Awaitable[dict[str, Any] | None]:
        """What to await for the repetition's report: in process, the repetition itself, with
        no frame of ours between (each is resumed again at every suspension of the agent); on a
        backend, its session's run (None when the backend is lost)."""
        if self._session is None:
            return self.repetitions.run(unit)
        return self._run_on_backend(self._session, unit)

    async def _run_on_backend(self, session: Session, unit: Unit) -> dict[str, Any] | None:
        try:
            report: dict[str, Any] = await session.run(unit)
        except BackendLost as exc:  # one error for the run, not one per repetition
            self._backend_error = self._backend_error or exc
            self._cancel_all.cancel()
            return None
        return report

    async def _record(self, unit: Unit, report: dict[str, Any]) -> None:
        """Count, write and hand on one repetition's report; decide whether more start."""
        task = unit.task
        self.counts[report["status"]] += 1  # counted before the write, which may be cut
        self.cost.add(report.get("usage"))
        if report["status"] == "success":
            self._calls_in_successes += int((report.get("usage") or {}).get("llm_calls", 0))
        if self._results is not None:
            await self._results.write(report)
        await self.callbacks.fire("on_task_repeat_end", self.bench, report)
        try:
            self.queue.on_task_complete(task, report)
            proceed = self.queue.should_continue()
        except Exception as exc:  # a broken queue: no new starts, raised at the end
            events.queue_failed(error=f"{type(exc).__name__}: {exc}")
            self._queue_error = self._queue_error or exc
            proceed = False
        await self.callbacks.fire("on_queue_decision", self.bench, self.queue, proceed)
        if not proceed:
            self._stopped = True
        if self.adaptive is not None:
            self.adaptive.recorded(unit, report)
            return
        state = self._task_states[task.id]
        state.reports.append(report)
        state.remaining -= 1
        if state.remaining == 0:
            del self._task_states[task.id]
            await self.callbacks.fire("on_task_end", self.bench, task, state.reports)
