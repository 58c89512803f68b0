"""Exceptions raised by asynceval, all under one root (layer 1 of DESIGN section 1: it imports
nothing of asynceval, and every layer may import it).

```
AsyncEvalError
├── ConfigError (also a ValueError)         a setting has a bad value
│   ├── RunLocked                           another run is writing this results file
│   └── CostUnbounded                       a budget cannot bound a call's cost (cost_unbounded)
├── TaskSpecError (also a ValueError)       a task (dict or JSONL line) is malformed
├── OpinionParseError (also a ValueError)   a judge's answer is not a usable opinion
├── LogFormatError (also a ValueError)      an events file line is not a JSON object
├── TaskError                               a task repetition failed; each maps to a report status
│   ├── AgentError                          agent_error
│   ├── TaskEnvironmentError                environment_error
│   ├── UserError                           user_error (the simulated user failed)
│   ├── TaskTimeoutError                    task_timeout
│   │   └── RepetitionExpired               an abandoned thread called after its repetition timed out
│   ├── SetupError                          setup_failed
│   └── EvaluationError                     evaluation_failed
├── ProviderError                           one attempt of an LLM call failed
│   ├── RateLimited                         HTTP 429
│   ├── ProviderConnectionError             the connection failed or broke
│   ├── MalformedResponse                   a 2xx whose body is not a usable completion
│   └── AttemptTimeout                      the attempt ran past LLM_CALL_TIMEOUT
│       └── StreamStalled                   a stream stalled for LLM_STREAM_IDLE_TIMEOUT before its content
├── LLMCallFailed                           a call failed for good (retries exhausted, or not retryable)
├── RunFinished                             a worker thread called into a run that has ended
├── BudgetExhausted                         the run's cost budget refused a call (budget_exhausted)
└── BackendLost                             the backend running a run's repetitions went away
```

A `ProviderError` describes one attempt and is what the retry policy looks at; callers of
`model.generate` only ever see `LLMCallFailed`, with the last `ProviderError` as its `__cause__`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RETRYABLE_STATUS_CODES",
    "AgentError",
    "AsyncEvalError",
    "AttemptTimeout",
    "BackendLost",
    "BudgetExhausted",
    "ConfigError",
    "CostUnbounded",
    "EvaluationError",
    "LLMCallFailed",
    "LogFormatError",
    "MalformedResponse",
    "OpinionParseError",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimited",
    "RepetitionExpired",
    "RunFinished",
    "RunLocked",
    "SetupError",
    "StreamStalled",
    "TaskEnvironmentError",
    "TaskError",
    "TaskSpecError",
    "TaskTimeoutError",
    "UserError",
]

# 529 is Anthropic's "overloaded", its spelling of 503.
RETRYABLE_STATUS_CODES = frozenset({408, 429, 502, 503, 529})


class AsyncEvalError(Exception):
    """Root of every exception asynceval raises on purpose."""


class ConfigError(AsyncEvalError, ValueError):
    """Raised when a setting has a bad value; the message names the variable and the value."""


class RunLocked(ConfigError):
    """Raised when a results file (a run directory) is being written by another run: its
    message names the holder's pid and host. Only one run writes a run at a time."""

    def __init__(self, message: str, *, pid: int | None, host: str | None) -> None:
        super().__init__(message)
        self.pid = pid
        self.host = host


class CostUnbounded(ConfigError):
    """Raised instead of sending a model call under a cost budget (MAX_COST_USD / `--max-cost`)
    when its worst case cannot be bounded: its model has no price, its body names no model, or
    its prompt holds server-side context and its model has no known context window. The message
    says which, and the setting that would bound it (LLM_PRICES_FILE). A repetition it ends is
    reported with the error kind `cost_unbounded`: asynceval's refusal, not the agent's bug."""


class TaskSpecError(AsyncEvalError, ValueError):
    """Raised when a task dict or a task file line is malformed; the message names where."""


class OpinionParseError(AsyncEvalError, ValueError):
    """Raised when a judge's answer, or an entry of a batched answer, is not a usable opinion."""


class LogFormatError(AsyncEvalError, ValueError):
    """Raised when an events file line is not a JSON object; the message names the line."""


class TaskError(AsyncEvalError):
    """Raised by benchmark code to fail a task repetition with a specific status."""


class AgentError(TaskError):
    """Raised when an agent fails (report status agent_error)."""


class TaskEnvironmentError(TaskError):
    """Raised when the task's environment fails (environment_error); not the builtin OSError."""


class UserError(TaskError):
    """Raised when the simulated user fails (user_error)."""


class SetupError(TaskError):
    """Raised when setting up a repetition fails (setup_failed)."""


class EvaluationError(TaskError):
    """Raised when evaluating a repetition fails (evaluation_failed)."""


class TaskTimeoutError(TaskError):
    """Raised when a repetition runs past its timeout (task_timeout), e.g. by `check_timeout()`."""

    def __init__(self, message: str, *, elapsed_s: float, timeout_s: float) -> None:
        super().__init__(message)
        self.elapsed_s = elapsed_s
        self.timeout_s = timeout_s


class RepetitionExpired(TaskTimeoutError):
    """Raised at once to a call from a sync thread whose repetition timed out (the thread was
    abandoned: it cannot be killed, so its further LLM calls are refused instead of queued)."""

    def __init__(self, task_id: str, repeat_idx: int, timeout_s: float, elapsed_s: float) -> None:
        super().__init__(
            f"task {task_id} repeat {repeat_idx} timed out after {timeout_s:g} s; "
            "this abandoned thread's call is refused",
            elapsed_s=elapsed_s,
            timeout_s=timeout_s,
        )
        self.task_id = task_id
        self.repeat_idx = repeat_idx


class RunFinished(AsyncEvalError):
    """Raised to a call from a worker thread of a run that has already ended (its event loop
    portal is closed): the thread outlived its run, and nothing is left to serve the call."""


class BudgetExhausted(AsyncEvalError):
    """An LLM call was not sent: its worst-case cost does not fit in what is left of the run's
    budget (MAX_COST_USD / `--max-cost`). Its repetition ends with status `budget_exhausted`
    (run again by `--resume`), and the run starts no new repetition. Never retried."""

    def __init__(self, budget_usd: float, spent_usd: float, needed_usd: float) -> None:
        super().__init__(
            f"the run's budget of ${budget_usd:.4g} is spent: ${spent_usd:.4g} spent or reserved "
            f"by calls in flight, and this call may cost up to ${needed_usd:.4g}"
        )
        self.budget_usd = budget_usd
        self.spent_usd = spent_usd
        self.needed_usd = needed_usd

    def __reduce__(self) -> tuple[Any, ...]:  # sent back from Dask's workers
        return (type(self), (self.budget_usd, self.spent_usd, self.needed_usd))


class BackendLost(AsyncEvalError):
    """The backend running a run's repetitions went away (its Dask scheduler stopped answering):
    the run ends with this error, and every report that had finished is kept."""


class ProviderError(AsyncEvalError):
    """Raised when one attempt of an LLM call fails: an error status, a broken body or connection."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.retry_after = retry_after
        self.body = body

    @property
    def retryable(self) -> bool:
        """Whether another attempt may succeed: 408, 429, 502 and 503 are; other statuses are not."""
        return self.status_code in RETRYABLE_STATUS_CODES

    def __str__(self) -> str:
        if self.status_code is None:
            return self.message
        return f"HTTP {self.status_code}: {self.message}"


class RateLimited(ProviderError):
    """Raised when the provider answers 429; `retry_after` holds its Retry-After in seconds, if any.

    `budget_empty` is True when the answer's rate-limit headers say a budget is spent (OpenAI's
    `x-ratelimit-remaining-*` or Anthropic's `anthropic-ratelimit-*-remaining` at 0): a rate
    refusal, which pauses the endpoint until that budget is whole again (when the headers say),
    rather than an overload; the call sent again waits that pause out.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        body: str | None = None,
        budget_empty: bool = False,
    ) -> None:
        super().__init__(message, status_code=status_code, retry_after=retry_after, body=body)
        self.budget_empty = budget_empty


class _AlwaysRetryable(ProviderError):
    @property
    def retryable(self) -> bool:
        return True


class ProviderConnectionError(_AlwaysRetryable):
    """Raised when the connection to the provider cannot be made or breaks mid-request."""


class MalformedResponse(_AlwaysRetryable):
    """Raised when a successful status carries a body that is not JSON or not a completion."""


class AttemptTimeout(_AlwaysRetryable):
    """Raised when one attempt runs past LLM_CALL_TIMEOUT; the slot is released and the call retried."""

    def __init__(self, timeout_s: float, message: str | None = None) -> None:
        super().__init__(message or f"no answer within {timeout_s:g} s (LLM_CALL_TIMEOUT)")
        self.timeout_s = timeout_s


class StreamStalled(AttemptTimeout):
    """Raised when a streamed answer brings no chunk for LLM_STREAM_IDLE_TIMEOUT before any of its
    content reached the caller: the attempt is abandoned, its slot released, and the call
    retried."""

    def __init__(self, idle_s: float) -> None:
        super().__init__(
            idle_s, f"the stream brought no chunk within {idle_s:g} s (LLM_STREAM_IDLE_TIMEOUT)"
        )


class LLMCallFailed(AsyncEvalError):
    """Raised to the caller when an LLM call has failed for good.

    Either every allowed attempt failed with a retryable error (`retryable` is then True: the
    same call may succeed later), or the provider refused it outright, e.g. HTTP 400 or 401
    (`retryable` is False). The last attempt's `ProviderError` is the `__cause__`.
    """

    def __init__(
        self,
        *,
        agent: str | None,
        dimension: str | None,
        status_code: int | None,
        attempts: int,
        elapsed_s: float,
        message: str,
        retryable: bool,
    ) -> None:
        self.agent = agent
        self.dimension = dimension
        self.status_code = status_code
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.message = message
        self.retryable = retryable
        status = "no status" if status_code is None else f"HTTP {status_code}"
        super().__init__(
            f"LLM call failed after {attempts} attempt{'s' if attempts != 1 else ''} "
            f"in {elapsed_s:.2f} s (agent={agent}, dimension={dimension}, {status}): {message}"
        )
