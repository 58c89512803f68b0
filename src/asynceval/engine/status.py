"""Outcome of a repetition: did the infrastructure work (status), and why did its loop end.

Three independent questions (seed 002): `status` says whether the repetition ran without an error,
`termination_reason` how its execution loop ended (only for runs that got that far: null for error
statuses), and the report's `eval` whether the agent passed. MAX_STEPS keeps status success and
evaluation still runs.
"""

from __future__ import annotations

from enum import StrEnum

from ..errors import (
    AgentError,
    EvaluationError,
    SetupError,
    TaskEnvironmentError,
    TaskError,
    TaskTimeoutError,
    UserError,
)


class TaskExecutionStatus(StrEnum):
    """Whether a repetition completed without an error; pass/fail lives in `eval`, not here."""

    SUCCESS = "success"
    AGENT_ERROR = "agent_error"
    ENVIRONMENT_ERROR = "environment_error"
    USER_ERROR = "user_error"
    TASK_TIMEOUT = "task_timeout"
    UNKNOWN_EXECUTION_ERROR = "unknown_execution_error"
    EVALUATION_FAILED = "evaluation_failed"
    SETUP_FAILED = "setup_failed"
    BUDGET_EXHAUSTED = "budget_exhausted"  # the run's cost budget refused a call: not scored


class TerminationReason(StrEnum):
    """How the execution loop ended."""

    AGENT_STOP = "agent_stop"  # the agent said it was done
    USER_STOP = "user_stop"  # the (simulated) user was satisfied
    MAX_STEPS = "max_steps"  # max_invocations turns ran out
    UNKNOWN = "unknown"  # a custom execution_loop did not record a reason


_STATUS_OF: tuple[tuple[type[TaskError], TaskExecutionStatus], ...] = (
    (TaskTimeoutError, TaskExecutionStatus.TASK_TIMEOUT),
    (AgentError, TaskExecutionStatus.AGENT_ERROR),
    (TaskEnvironmentError, TaskExecutionStatus.ENVIRONMENT_ERROR),
    (UserError, TaskExecutionStatus.USER_ERROR),
    (SetupError, TaskExecutionStatus.SETUP_FAILED),
    (EvaluationError, TaskExecutionStatus.EVALUATION_FAILED),
)


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, in order; the error itself otherwise."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


def status_for(error: BaseException, phase: str) -> TaskExecutionStatus:
    """The status an error raised in `phase` ("setup", "execution", "evaluation") maps to.

    Errors of ours map to their status wherever they are raised, also from inside an exception
    group (several agents run at once); anything else raised while setting up is setup_failed,
    while evaluating evaluation_failed, and otherwise unknown_execution_error.
    """
    for leaf in leaf_errors(error):
        for cls, status in _STATUS_OF:
            if isinstance(leaf, cls):
                return status
    return _status_of_phase(phase)


def _status_of_phase(phase: str) -> TaskExecutionStatus:
    if phase == "setup":
        return TaskExecutionStatus.SETUP_FAILED
    if phase == "evaluation":
        return TaskExecutionStatus.EVALUATION_FAILED
    return TaskExecutionStatus.UNKNOWN_EXECUTION_ERROR
