"""asynceval: an asyncio-native engine for running LLM and agent evaluations.

The root holds what a benchmark is written with; the rest lives in public submodules:
`asynceval.errors` (every exception), `asynceval.events` (event output), `asynceval.engine`
(queues, reports, results files), `asynceval.limits` (limiter, rate buckets, retry policy),
`asynceval.llm` (models, completions, usage), `asynceval.runtime`, `asynceval.agents`,
`asynceval.tools`, `asynceval.evaluation`, `asynceval.interop` (every framework's calls through
the funnel), `asynceval.analysis`, `asynceval.distributed` and `asynceval.sim`. Names that used to
be at the root still work for one release, with a DeprecationWarning naming their new home.

The package is layered (DESIGN section 1; `lint-imports` checks it): config, errors and a private
kernel; events; limits; runtime; the funnel (internal: every call's journey); llm and interop;
engine; agents, tools, evaluation; analysis, distributed, cli. A module imports only layers
below its own; this root re-exports from them and none of them imports it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._moved import moved_names
from ._version import __version__
from .config import Settings
from .engine import (
    AdaptiveQueue,
    AdaptiveRepeats,
    Benchmark,
    BenchmarkCallback,
    PriorityQueue,
    SequentialQueue,
    Task,
    TaskExecutionStatus,
    TaskProtocol,
    TerminationReason,
    TimeoutAction,
    current_context,
)
from .errors import AsyncEvalError, LLMCallFailed
from .events import configure_logging
from .llm import AnthropicChatModel, ChatModel, Completion, OpenAIChatModel
from .runtime import Runtime

if TYPE_CHECKING:
    from .agents import SyncAgent
    from .engine import load_tasks
    from .evaluation import JudgePanel
    from .interop import http_client, sync_http_client
    from .tools import Tool, ToolExecutor


__all__ = [
    "AdaptiveQueue",
    "AdaptiveRepeats",
    "AnthropicChatModel",
    "AsyncEvalError",
    "Benchmark",
    "BenchmarkCallback",
    "ChatModel",
    "Completion",
    "JudgePanel",
    "LLMCallFailed",
    "OpenAIChatModel",
    "PriorityQueue",
    "Runtime",
    "SequentialQueue",
    "Settings",
    "SyncAgent",
    "Task",
    "TaskExecutionStatus",
    "TaskProtocol",
    "TerminationReason",
    "TimeoutAction",
    "Tool",
    "ToolExecutor",
    "__version__",
    "configure_logging",
    "current_context",
    "http_client",
    "load_tasks",
    "sync_http_client",
]

# Root names of the previous release -> the public submodule that holds them now.
_MOVED = {
    **dict.fromkeys(
        (
            "AgentError",
            "AttemptTimeout",
            "ConfigError",
            "EvaluationError",
            "MalformedResponse",
            "ProviderConnectionError",
            "ProviderError",
            "RateLimited",
            "SetupError",
            "TaskEnvironmentError",
            "TaskError",
            "TaskSpecError",
            "TaskTimeoutError",
            "UserError",
        ),
        "asynceval.errors",
    ),
    **dict.fromkeys(
        (
            "REPORT_KEYS",
            "ComponentRegistry",
            "Evaluator",
            "TaskContext",
            "TaskQueue",
            "iter_tasks",
        ),
        "asynceval.engine",
    ),
    **dict.fromkeys(
        ("ConcurrencyController", "ControllerStatistics", "RateLimiter", "RetryPolicy"),
        "asynceval.limits",
    ),
    **dict.fromkeys(("ToolCall", "Usage", "UsageCounter", "track_usage"), "asynceval.llm"),
    **dict.fromkeys(("Dimension", "JudicialOpinion", "PanelResult"), "asynceval.evaluation"),
    **dict.fromkeys(("bind_context", "register_secret"), "asynceval.events"),
}
_moved = moved_names("asynceval", _MOVED, globals(), depth=1)


def _default_controller(settings: Settings | None = None) -> Any:
    """The previous release's per-loop default controller: now the current Runtime's limiter."""
    return Runtime.current().limiter


# Root names imported on first use: `asynceval.interop` brings httpx, whose own import brings its
# command line's rich, click and pygments (a tenth of `import asynceval`); `load_tasks` its
# file readers; the judge panel its pydantic models (slow to build); tools and sync agents
# modules of their own that a benchmark without them never needs.
_LAZY = {
    "http_client": "interop",
    "sync_http_client": "interop",
    "load_tasks": "engine",
    "JudgePanel": "evaluation",
    "Tool": "tools",
    "ToolExecutor": "tools",
    "SyncAgent": "agents",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"asynceval.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name == "default_controller":
        warnings.warn(
            "asynceval.default_controller is deprecated and will be removed in the next release; "
            "use asynceval.Runtime.current().limiter",
            DeprecationWarning,
            stacklevel=2,
        )
        globals()[name] = _default_controller
        return _default_controller
    return _moved(name)


def __dir__() -> list[str]:
    return sorted(__all__)
