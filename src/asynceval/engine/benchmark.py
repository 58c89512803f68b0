"""Benchmark: subclass it, implement the hooks, `await bench.run(tasks)`.

Each hook may be `def` or `async def`. Async hooks run on the event loop; sync hooks run in worker
threads on the engine's own thread limiter, so sync agent frameworks work unchanged and their LLM
calls (`model.generate_sync`) still go through the one global controller. The hooks and their
order follow MASEval:

    setup_environment -> setup_user -> setup_agents -> setup_evaluators
    -> execution_loop (run_agents, agent_is_done, the user's reply, user_is_satisfied)
    -> evaluate (every evaluator at once)

Only `setup_agents` has no default.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from os import PathLike
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread

from ..config import Settings
from ..limits import ConcurrencyController, CostBudget
from ..runtime import Runtime
from ._adaptive_repeats import AdaptiveRepeats
from ._bypass import watch_run
from .callbacks import BenchmarkCallback
from .context import current_context
from .queues import TaskQueue
from .registry import ComponentRegistry
from .report import error_entry
from .run_reports import RunReports
from .scheduler import Run
from .statistics import Reducer, as_reducer
from .status import TerminationReason
from .task import Task
from .threads import call_maybe_async

if TYPE_CHECKING:
    from .backend import Backend

Evaluator = Callable[..., Any]
"""Called as `evaluator(task=..., answer=..., traces=...)`, sync or async; returns a dict."""

_user: ContextVar[Any] = ContextVar("asynceval_user", default=None)


def _callable_of(obj: Any, method: str) -> Callable[..., Any]:
    if callable(obj):
        return obj  # type: ignore[no-any-return]
    bound = getattr(obj, method, None)
    if not callable(bound):
        raise TypeError(f"{obj!r} is neither callable nor has a {method}() method")
    return bound  # type: ignore[no-any-return]


class Benchmark(ABC):
    """A set of hooks the engine runs for every task repetition (see the module docstring).

    `n_task_repeats` runs each task that many times; `max_invocations` bounds the turns of the
    default execution loop; `max_concurrent_tasks` (default MAX_CONCURRENT_TASKS) bounds the
    repetitions alive at once. `runtime` is the Runtime the run's calls go through (default: the one
    current when the run starts, usually the process default, so the limit is shared with every
    other run and thread of the process); `settings` without a runtime gives the run a Runtime of
    its own built from them; `controller` replaces the runtime's limiter for this run.
    `reducers` (names such as "pass_at_k(5)" or `Reducer`s; a bad name is a ConfigError) say how
    a task's repetitions reduce to one value in the summary, beside the mean; the results
    header's `benchmark_config` records their names. For repeats that adapt to a target
    precision instead of a fixed count, see `run(repeats=AdaptiveRepeats(...))`.
    """

    def __init__(
        self,
        *,
        n_task_repeats: int = 1,
        max_invocations: int = 1,
        max_concurrent_tasks: int | None = None,
        callbacks: Sequence[BenchmarkCallback] = (),
        settings: Settings | None = None,
        controller: ConcurrencyController | None = None,
        runtime: Runtime | None = None,
        reducers: Sequence[Reducer | str] = (),
    ) -> None:
        for name, value in (
            ("n_task_repeats", n_task_repeats),
            ("max_invocations", max_invocations),
            ("max_concurrent_tasks", 1 if max_concurrent_tasks is None else max_concurrent_tasks),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.n_task_repeats = n_task_repeats
        self.max_invocations = max_invocations
        self.max_concurrent_tasks = max_concurrent_tasks
        self.callbacks = list(callbacks)
        self.settings = settings
        self.controller = controller
        self.runtime = runtime
        self.reducers: list[Reducer] = [as_reducer(reducer) for reducer in reducers]
        self.registry = ComponentRegistry()  # its benchmark_config is gathered when a run starts
        self.reports: RunReports = RunReports.empty()
        """The last run's reports (what `run` returned)."""
        self.adaptive_outcome: dict[str, Any] | None = None
        """The last run's adaptive repeats (`run(repeats=AdaptiveRepeats(...))`): why the rule
        stopped ("ci_width_reached", "max_repeats", "queue_stopped"), the half-width it reached and
        the repetitions it took; None for a run with fixed repeats."""
        self.budget: CostBudget | None = None
        """The last run's cost budget (`run(max_cost_usd=...)` or MAX_COST_USD): its `spent`,
        whether it was `exhausted`; None for a run without one."""

    def gather_config(self) -> dict[str, Any]:
        """The benchmark's own configuration, recorded in every report's `config`."""
        return {
            "name": type(self).__qualname__,
            "n_task_repeats": self.n_task_repeats,
            "max_invocations": self.max_invocations,
            "reducers": [reducer.name for reducer in self.reducers],
        }

    def default_tasks(self) -> Iterable[Task | Mapping[str, Any]] | None:
        """The tasks `asynceval run TARGET` uses when no --tasks file is given; None: none."""
        return None

    # --- hooks -----------------------------------------------------------------------------

    async def setup_environment(self, agent_data: Mapping[str, Any], task: Task) -> Any:
        """The task's environment; by default a copy of `task.environment_data`."""
        return dict(task.environment_data)

    async def setup_user(self, agent_data: Mapping[str, Any], environment: Any, task: Task) -> Any:
        """A simulated user (called with the agents' answer, returns its reply), or None."""
        return None

    @abstractmethod
    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        """(agents_to_run, agents_by_name). An agent is a callable taking the query, or an object
        with a `run(query)` method; either may be sync or async."""

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Evaluator]:
        """Evaluators for `evaluate`; none by default."""
        return []

    async def run_agents(
        self, agents_to_run: Sequence[Any], task: Task, environment: Any, query: Any
    ) -> Any:
        """Run the agents on `query`: one agent's answer, or the list of several agents' answers
        (run at once)."""
        if len(agents_to_run) == 1:
            return await call_maybe_async(_callable_of(agents_to_run[0], "run"), query)
        answers: list[Any] = [None] * len(agents_to_run)

        async def one(index: int, agent: Any) -> None:
            answers[index] = await call_maybe_async(_callable_of(agent, "run"), query)

        async with anyio.create_task_group() as tg:
            for index, agent in enumerate(agents_to_run):
                tg.start_soon(one, index, agent)
        return answers

    async def agent_is_done(self, answer: Any) -> bool:
        """Whether the agents are finished after this answer; by default, when there is no user."""
        return _user.get() is None

    async def user_is_satisfied(self, user_response: Any) -> bool:
        """Whether the user's reply ends the conversation: by default a reply of None, or one whose
        `satisfied` attribute or key is true."""
        if user_response is None:
            return True
        if isinstance(user_response, Mapping):
            return bool(user_response.get("satisfied", False))
        return bool(getattr(user_response, "satisfied", False))

    async def execution_loop(
        self, agents_to_run: Sequence[Any], task: Task, environment: Any, user: Any
    ) -> Any:
        """Up to `max_invocations` turns of run_agents and the user's reply; records AGENT_STOP,
        USER_STOP or MAX_STEPS. The user is called with the answer (or its `respond` method)."""
        token = _user.set(user)
        try:
            query = task.query
            answer: Any = None
            for _ in range(self.max_invocations):
                answer = await call_maybe_async(
                    self.run_agents, agents_to_run, task, environment, query
                )
                if await call_maybe_async(self.agent_is_done, answer):
                    self.record_termination(TerminationReason.AGENT_STOP)
                    return answer
                if user is not None:
                    reply = await call_maybe_async(_callable_of(user, "respond"), answer)
                    if await call_maybe_async(self.user_is_satisfied, reply):
                        self.record_termination(TerminationReason.USER_STOP)
                        return answer
                    query = reply
            self.record_termination(TerminationReason.MAX_STEPS)
            return answer
        finally:
            _user.reset(token)

    async def evaluate(
        self,
        evaluators: Sequence[Evaluator],
        agents_by_name: Mapping[str, Any],
        answer: Any,
        traces: Mapping[str, Any],
    ) -> list[Any]:
        """Every evaluator at once, each as `evaluator(task=..., answer=..., traces=...)`. One that
        raises becomes `{"evaluator": name, "error": {...}}` and the repetition's status
        evaluation_failed; the others' results stay."""
        context = current_context()
        task = self._current_task
        results: list[Any] = [None] * len(evaluators)

        async def one(index: int, evaluator: Evaluator) -> None:
            name = getattr(evaluator, "__name__", type(evaluator).__name__)
            try:
                results[index] = await call_maybe_async(
                    evaluator, task=task, answer=answer, traces=traces
                )
            except Exception as exc:
                entry = {"evaluator": name, "error": error_entry(exc)}
                results[index] = entry
                if context is not None:
                    context.evaluation_errors.append(entry)
                    context.evaluation_exceptions.append(exc)  # for the retry decision

        if len(evaluators) == 1:
            await one(0, evaluators[0])  # no task group needed for one
        elif evaluators:
            async with anyio.create_task_group() as tg:
                for index, evaluator in enumerate(evaluators):
                    tg.start_soon(one, index, evaluator)
        return results

    # --- helpers for hooks -----------------------------------------------------------------

    @property
    def _current_task(self) -> Task | None:
        context = current_context()
        return context.task if context is not None else None

    def register(self, category: str, name: str, component: Any) -> Any:
        """Track a component of the current repetition; its gather_traces()/gather_config() go
        into the report."""
        return self.registry.register(category, name, component)

    def record_termination(self, reason: TerminationReason | str) -> None:
        """Say how the execution loop ended (for custom `execution_loop`s)."""
        context = current_context()
        if context is None:
            raise RuntimeError("record_termination() works inside a task repetition")
        context.record_termination(TerminationReason(reason))

    # --- running ---------------------------------------------------------------------------

    async def run(
        self,
        tasks: Iterable[Task | Mapping[str, Any]] | None = None,
        *,
        queue: TaskQueue | Callable[[Iterable[Task | Mapping[str, Any]]], TaskQueue] | None = None,
        agent_data: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        results_path: str | PathLike[str] | None = None,
        resume: bool = False,
        collect: bool = True,
        backend: Backend | None = None,
        run_id: str | None = None,
        journal: bool | None = None,
        repeats: AdaptiveRepeats | None = None,
        max_cost_usd: float | None = None,
    ) -> RunReports:
        """Run every task `n_task_repeats` times and return the reports.

        `tasks` are Tasks or dicts of Task fields, taken lazily. `queue` is a TaskQueue, or a
        queue class to build from `tasks` (default SequentialQueue). `agent_data` is one dict for
        all tasks or a list with one per task. With `results_path`, reports are appended to that
        JSONL file as they complete; `resume=True` skips the (task, repeat) pairs already
        successful there. The reports come back as a `RunReports` sequence read from the results
        file on demand (a temporary file without `results_path`), so memory stays flat however
        many there are; `collect=False` returns none (they are still written to `results_path`).
        `backend` runs the repetitions elsewhere (`asynceval.distributed.DaskBackend`: a Dask
        cluster); the queue, results file, callbacks and summary stay here.

        One run writes a results file at a time: `results_path` is locked for the run (a lock
        held by another run raises `RunLocked`). A file that is not a results file is refused
        (ConfigError), and so is resuming one written by another benchmark or for another task
        set. `run_id` names the run (default: a new one, its UTC start and 8 hex digits).
        `journal` keeps every successful LLM call of the run beside `results_path` so that a
        resumed repetition replays the calls it had finished (default: on with a results_path).

        `repeats=AdaptiveRepeats(ci_width=W, max_repeats=N)` replaces `n_task_repeats` with the
        adaptive rule: one repetition per task, then more where they narrow the 95% half-width
        of the pass rate over the task set most, until it is <= W or every task has N; why it
        stopped is in `run_finished` and `self.adaptive_outcome`. With `resume=True` the
        repetitions already in the results file count and the rule goes on from them.

        `max_cost_usd` (default MAX_COST_USD) caps what the run spends on LLM calls (a
        `CostBudget`, then `self.budget`): a call that does not fit ends its repetition
        `budget_exhausted` (run again by a resume), and no repetition starts after it.
        """
        run = Run(
            self,
            tasks=tasks,
            queue=queue,
            agent_data=agent_data,
            results_path=results_path,
            resume=resume,
            collect=collect,
            backend=backend,
            run_id=run_id,
            journal=journal,
            repeats=repeats,
            max_cost_usd=max_cost_usd,
        )
        return await self._execute(run)

    async def _execute(self, run: Run) -> RunReports:
        """Execute `run`, keeping what it leaves on this benchmark (reports, adaptive outcome,
        budget)."""
        self.adaptive_outcome = None
        self.budget = run.budget
        try:
            with watch_run(run.run_id):  # SDK clients around the funnel, named at run_finished
                self.reports = await run.execute()
        finally:
            if run.adaptive is not None:
                self.adaptive_outcome = run.adaptive.outcome
        return self.reports

    def run_sync(self, *args: Any, **kwargs: Any) -> RunReports:
        """`run` for scripts and notebooks. Inside a running event loop (Jupyter), the run gets
        its own thread and event loop (an anyio blocking portal); this call blocks until it ends,
        and Ctrl-C cancels the run cleanly (finished reports are on disk) before re-raising."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: run one here
            return anyio.run(lambda: self.run(*args, **kwargs))
        with anyio.from_thread.start_blocking_portal() as portal:
            future = portal.start_task_soon(functools.partial(self.run, *args, **kwargs))
            try:
                reports: RunReports = future.result()
                return reports
            except KeyboardInterrupt:
                future.cancel()
                with contextlib.suppress(BaseException):
                    future.result()  # the cancelled run's cleanup
                raise
