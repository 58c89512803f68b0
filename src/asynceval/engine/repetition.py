"""One task repetition: its attempts, each under the repetition's timeout, and its report.

An attempt runs the benchmark's hooks in order under `anyio.fail_after`; a timeout gives a
task_timeout outcome with the traces gathered so far. `Repetitions.run` re-runs a timed-out attempt
once when the task's TimeoutAction says so (EXTEND doubles the time), and re-runs failures that
may pass another time (a failed LLM call that may succeed later, an error of no status of its
own) up to `max_retries` times with the retry policy's backoff. Only cancellation of the run
itself and the process exiting (KeyboardInterrupt, SystemExit) escape; anything else, a stray
cancellation from the benchmark's own code or an application's own BaseException included,
becomes the repetition's status.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Awaitable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio.from_thread import BlockingPortal

from .. import events
from ..config import Settings
from ..errors import BudgetExhausted, TaskTimeoutError
from ..funnel import UsageCounter, reclaiming_leases, track_usage
from ..limits import RetryPolicy
from ..runtime import Bridge, bridge_scope
from ..telemetry import Telemetry, TracedBlock, current_telemetry, telemetry_scope
from ._error_kinds import ErrorKind, with_kind
from ._hook_results import auto_register, split_agents
from ._watch import cancel_tasks_left, count_calls_cut, end_tasks_left, live_calls, observe_calls
from ._watch import watch_loop as _watch_loop
from .context import TaskContext, task_context
from .report import build_report, error_entry, eval_score, worth_running_again
from .status import TaskExecutionStatus, TerminationReason, leaf_errors, status_for
from .task import Task, TimeoutAction
from .threads import call_maybe_async

if TYPE_CHECKING:
    from .benchmark import Benchmark


@dataclass
class Unit:
    """One repetition to run: the task, its agent_data, which repeat, when it was chosen, and,
    sent to another process (a Dask worker), the W3C trace context of the caller's run span
    (`trace_parent`: its repetition's span joins the caller's trace)."""

    task: Task
    agent_data: Mapping[str, Any]
    repeat_idx: int
    selected_at: float
    trace_parent: Mapping[str, str] | None = None


@dataclass
class _Outcome:
    status: TaskExecutionStatus
    termination_reason: TerminationReason | None
    eval_results: list[Any] | None
    error: BaseException | None
    error_info: Mapping[str, Any] | None
    traces: Mapping[str, Any]
    config: Mapping[str, Any]


_DECIDE: Any = object()


class Repetitions:
    """Runs repetitions of one benchmark with one run's settings.

    `telemetry` is the run's (`asynceval.telemetry`; None: off); by default it is decided here,
    once (a cluster's worker decides for its share of the run).
    """

    def __init__(
        self,
        bench: Benchmark,
        settings: Settings,
        policy: RetryPolicy,
        telemetry: Telemetry | None = _DECIDE,
    ) -> None:
        self.bench = bench
        self.settings = settings
        self.policy = policy
        self.telemetry: Telemetry | None = (
            current_telemetry() if telemetry is _DECIDE else telemetry
        )
        self.portal: BlockingPortal | None = None  # the run's, set when it starts
        self.run_over = threading.Event()  # set when the run ends: leftover threads are refused
        self._watching = False  # the loop watch (blocks, tasks left running) started
        observe_calls()

    def run(self, unit: Unit) -> Awaitable[dict[str, Any]]:
        """Every attempt of one repetition (timeout re-runs, `max_retries` re-runs): one report.
        What to await: with telemetry off, `_run` itself, no frame between; else `_run` in the
        repetition's span."""
        telemetry = self.telemetry
        if telemetry is None:
            return self._run(unit)
        return self._traced(unit, telemetry)

    async def _traced(self, unit: Unit, telemetry: Telemetry) -> dict[str, Any]:
        """`_run` in the repetition's span (its calls' spans are its children), which says at
        its end what the report says (status, score, usage) and each evaluator's result."""
        run_id = events.context_value("run_id")
        span = TracedBlock.repetition(
            telemetry, unit.task.id, unit.repeat_idx, run_id, unit.trace_parent
        )
        with span, telemetry_scope(telemetry):
            report = await self._run(unit)
            ended = report["status"] in _LOOP_ENDED_VALUES
            span.repetition_finished(report, eval_score(report["eval"]) if ended else None)
        return report

    async def _run(self, unit: Unit) -> dict[str, Any]:
        """`run`. The attempts' loop is here, not in a method of its own: each frame between the
        run and the agent is resumed again at every suspension of the agent."""
        if not self._watching:
            self._watching = True
            _watch_loop(self.settings.loop_block_warn_s, self.run_over)
        started = time.monotonic()
        usage = UsageCounter()
        task_id, repeat_idx = unit.task.id, unit.repeat_idx
        protocol = unit.task.protocol
        timeout = protocol.timeout_seconds or self.settings.task_timeout
        attempt = retries = 0
        timeout_rerun_used = False
        with events.bind_context(task_id=task_id, repeat_idx=repeat_idx):
            events.task_started(task_id=task_id, repeat_idx=repeat_idx)
            while True:
                attempt += 1
                outcome = await self._attempt(unit, timeout, attempt, usage)
                # Whatever the agent made of it; a refusal in a thread without the
                # repetition's context is known by the error it raised.
                refusal = usage.budget_refusal or _budget_error(outcome.error)
                if refusal is not None:
                    outcome = _out_of_budget(outcome, refusal)
                    return _finished(unit, outcome, attempt, usage, started)
                status = outcome.status
                if (
                    status is TaskExecutionStatus.TASK_TIMEOUT
                    and protocol.timeout_action is not TimeoutAction.SKIP
                    and not timeout_rerun_used
                ):
                    timeout_rerun_used = True
                    if protocol.timeout_action is TimeoutAction.EXTEND and timeout is not None:
                        timeout *= 2
                    again, delay = f"timeout_action={protocol.timeout_action.value}", 0.0
                elif (
                    status is not TaskExecutionStatus.SUCCESS
                    and retries < protocol.max_retries
                    and worth_running_again(status, outcome.error)
                ):
                    retries += 1
                    again, delay = "max_retries", self.policy.delay(retries)
                else:
                    return _finished(unit, outcome, attempt, usage, started)
                events.task_retry(
                    task_id=task_id,
                    repeat_idx=repeat_idx,
                    attempt=attempt,
                    status=status.value,
                    reason=again,
                    delay_s=delay,
                )
                if delay:
                    await anyio.sleep(delay)

    async def _attempt(
        self, unit: Unit, timeout_s: float | None, attempt: int, usage: UsageCounter
    ) -> _Outcome:
        """One attempt under the repetition's timeout; raises only what ends the run (its
        cancellation, KeyboardInterrupt, SystemExit).

        Its worker threads reach the loop through a bridge closed when the attempt ends, so an
        abandoned thread's calls are cancelled then and refused afterwards.
        """
        task = unit.task
        registry = self.bench.registry
        context = TaskContext(
            task=task, repeat_idx=unit.repeat_idx, timeout_s=timeout_s, attempt=attempt
        )
        state = _AttemptState()
        live_before = live_calls(usage)
        bridge = self._bridge(unit, timeout_s)
        # Leases are reclaimed last, after the bridge has stopped the attempt's threads.
        with (
            reclaiming_leases(),
            task_context(context),
            registry.scope(),
            track_usage(usage),
            _bridged(bridge),
        ):
            deadline = anyio.fail_after(timeout_s) if timeout_s is not None else _NO_DEADLINE
            scope: anyio.CancelScope | None = None
            try:
                with deadline as scope:
                    await self._hooks(unit, state)
            except TimeoutError as exc:
                if scope is None or timeout_s is None or not scope.cancel_called:
                    state.error = exc  # the code's own TimeoutError, not our deadline
                else:
                    state.error = TaskTimeoutError(
                        f"task {task.id} ran past its {timeout_s:g} s timeout during {state.phase}",
                        elapsed_s=time.monotonic() - state.started,
                        timeout_s=timeout_s,
                    )
            except Exception as exc:
                state.error = exc
            except BaseException as exc:
                if _ends_the_run(exc):
                    cancel_tasks_left(context)
                    raise  # the run itself is being cancelled, or the process is exiting
                # e.g. awaiting a task the code cancelled itself, a GeneratorExit, a
                # BaseException of the application's own: this repetition's error
                state.error = exc
            finally:
                if bridge is not None:
                    bridge.close(timed_out=isinstance(state.error, TaskTimeoutError))
            if context.started_tasks:
                await end_tasks_left(context, state.agents)
            count_calls_cut(context, usage, live_before)
            return _outcome(state, context, registry, timeout_s)

    def _bridge(self, unit: Unit, timeout_s: float | None) -> Bridge | None:
        if self.portal is None:
            return None
        return Bridge(self.portal, unit.task.id, unit.repeat_idx, timeout_s, self.run_over)

    async def _hooks(self, unit: Unit, state: _AttemptState) -> None:
        """The benchmark's hooks in order, recording the phase reached and what they gave."""
        bench, task, data = self.bench, unit.task, unit.agent_data
        environment = await call_maybe_async(bench.setup_environment, data, task)
        user = await call_maybe_async(bench.setup_user, data, environment, task)
        agents = await call_maybe_async(bench.setup_agents, data, environment, task, user)
        agents_to_run, agents_by_name = split_agents(agents)
        state.agents = agents_by_name
        evaluators = await call_maybe_async(
            bench.setup_evaluators, environment, task, agents_by_name, user
        )
        auto_register(bench.registry, environment, user, agents_by_name)
        state.phase = "execution"
        answer = await call_maybe_async(
            bench.execution_loop, agents_to_run, task, environment, user
        )
        state.phase = "evaluation"
        state.traces = bench.registry.collect_traces()
        state.eval_results = await call_maybe_async(
            bench.evaluate, evaluators, agents_by_name, answer, state.traces
        )


def _finished(
    unit: Unit, outcome: _Outcome, attempts: int, usage: UsageCounter, started: float
) -> dict[str, Any]:
    """The repetition's task_finished event (inside its bound context) and its report."""
    duration = time.monotonic() - started
    task_id, repeat_idx = unit.task.id, unit.repeat_idx
    status, reason = outcome.status, outcome.termination_reason
    events.task_finished(
        task_id=task_id,
        repeat_idx=repeat_idx,
        status=status.value,
        termination_reason=reason.value if reason and status in _LOOP_ENDED else None,
        duration_s=duration,
        score=eval_score(outcome.eval_results) if status in _LOOP_ENDED else None,
        attempts=attempts,
    )
    return build_report(
        run_id=events.context_value("run_id"),  # bound by the run (on a worker: by its plugin)
        task_id=task_id,
        repeat_idx=repeat_idx,
        status=status,
        termination_reason=reason,
        eval_results=outcome.eval_results,
        error=outcome.error_info,
        traces=outcome.traces,
        config=outcome.config,
        usage=usage.as_dict(),
        queued_s=started - unit.selected_at,
        duration_s=duration,
        attempts=attempts,
    )


def _out_of_budget(outcome: _Outcome, refusal: Exception) -> _Outcome:
    """An attempt one of whose calls the run's budget refused: `budget_exhausted`, not scored,
    whatever its agent made of the refusal (raised it, or caught it and answered)."""
    error = _budget_error(outcome.error) or refusal
    info = {**error_entry(error), "kind": ErrorKind.BUDGET_EXHAUSTED.value}
    return _Outcome(
        TaskExecutionStatus.BUDGET_EXHAUSTED,
        None,
        None,
        error,
        info,
        outcome.traces,
        outcome.config,
    )


def _budget_error(error: BaseException | None) -> BudgetExhausted | None:
    """The `BudgetExhausted` behind `error` (in a group, or as a cause of what an agent or SDK
    raised instead), if any."""
    for leaf in leaf_errors(error) if error is not None else []:
        cause: BaseException | None = leaf
        for _ in range(50):
            if cause is None:
                break
            if isinstance(cause, BudgetExhausted):
                return cause
            cause = cause.__cause__ or cause.__context__
    return None


class _AttemptState:
    """What one attempt reached: its phase, traces, evaluation results and error."""

    __slots__ = ("agents", "error", "eval_results", "events_context", "phase", "started", "traces")

    def __init__(self) -> None:
        self.phase = "setup"
        self.agents: Mapping[str, Any] | None = None
        # The bound event fields (run_id, task_id, repeat_idx): a loop_blocked WARNING found
        # by the loop watch's thread is written in them.
        self.events_context = contextvars.copy_context()
        self.traces: Mapping[str, Any] | None = None
        self.eval_results: list[Any] | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()


def _outcome(
    state: _AttemptState, context: TaskContext, registry: Any, timeout_s: float | None
) -> _Outcome:
    """The attempt's status and report parts from what it reached."""
    traces = state.traces if state.traces is not None else registry.collect_traces()
    config = registry.collect_configs()
    error = state.error
    info: Mapping[str, Any] | None
    phase = state.phase
    if error is not None:
        status = status_for(error, phase)
        info = error_entry(error, elapsed_s=time.monotonic() - state.started, timeout_s=timeout_s)
    elif context.evaluation_errors:
        status, phase = TaskExecutionStatus.EVALUATION_FAILED, "evaluation"
        info = context.evaluation_errors[0]["error"]
        error = next(iter(context.evaluation_exceptions), None)  # decides a max_retries re-run
    elif context.failed_calls:
        status, error = TaskExecutionStatus.EVALUATION_FAILED, context.failed_calls[0]
        phase = "evaluation"
        info = error_entry(error, elapsed_s=time.monotonic() - state.started, timeout_s=timeout_s)
    else:
        status, info = TaskExecutionStatus.SUCCESS, None
    if info is not None:
        info = with_kind(info, error, phase, state.started)
    reason = context.termination_reason
    if reason is None and state.phase != "setup" and status in _LOOP_ENDED:
        reason = TerminationReason.UNKNOWN
    return _Outcome(status, reason, state.eval_results, error, info, traces, config)


def _bridged(bridge: Bridge | None) -> AbstractContextManager[Any]:
    return bridge_scope(bridge) if bridge is not None else _NO_DEADLINE


def _ends_the_run(error: BaseException) -> bool:
    """Whether `error` is for the run, not this repetition: the process exiting (Ctrl-C, a
    SystemExit), or a cancellation someone asked for (of the run, or of its timeout)."""
    if isinstance(error, KeyboardInterrupt | SystemExit):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_ends_the_run(inner) for inner in error.exceptions)
    if not isinstance(error, anyio.get_cancelled_exc_class()):
        return False
    # A cancellation nobody asked this task for (asyncio counts requests; trio has no strays)
    # is the code's own: awaiting a task it cancelled itself.
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return True
    return task is None or task.cancelling() > 0


_NO_DEADLINE: nullcontext[None] = nullcontext()  # reusable: no cancel scope without a timeout


_LOOP_ENDED = (TaskExecutionStatus.SUCCESS, TaskExecutionStatus.EVALUATION_FAILED)
_LOOP_ENDED_VALUES = frozenset(status.value for status in _LOOP_ENDED)
