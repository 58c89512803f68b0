"""The public surface: about 25 root names, public submodules, deprecated root names still working."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import asynceval

ROOT = Path(__file__).parents[1]


SURFACE: dict[str, list[str]] = {
    "asynceval": [
        "AdaptiveQueue", "AdaptiveRepeats", "AnthropicChatModel", "AsyncEvalError", "Benchmark",
        "BenchmarkCallback", "ChatModel", "Completion", "JudgePanel", "LLMCallFailed", "OpenAIChatModel",
        "PriorityQueue", "Runtime", "SequentialQueue", "Settings", "SyncAgent", "Task",
        "TaskExecutionStatus", "TaskProtocol", "TerminationReason", "TimeoutAction", "Tool",
        "ToolExecutor", "__version__", "configure_logging", "current_context", "http_client",
        "load_tasks", "sync_http_client",
    ],
    "asynceval.agents": ["SyncAgent"],
    "asynceval.analysis": ["LogCheck", "Summary", "check_events", "summarize", "wilson_interval"],
    "asynceval.distributed": ["DaskBackend"],
    "asynceval.engine": [
        "REPORT_KEYS", "AdaptiveQueue", "AdaptiveRepeats", "Benchmark", "BenchmarkCallback",
        "ComponentRegistry", "Evaluator", "PriorityQueue", "RunReports", "SequentialQueue", "Task",
        "TaskContext", "TaskExecutionStatus", "TaskProtocol", "TaskQueue", "TerminationReason",
        "TimeoutAction", "current_context", "iter_tasks", "load_tasks", "read_records", "successful_pairs",
    ],
    "asynceval.errors": [
        "RETRYABLE_STATUS_CODES", "AgentError", "AsyncEvalError", "AttemptTimeout", "BackendLost",
        "BudgetExhausted", "ConfigError", "CostUnbounded",
        "EvaluationError", "LLMCallFailed", "LogFormatError", "MalformedResponse",
        "OpinionParseError", "ProviderConnectionError", "ProviderError", "RateLimited",
        "RepetitionExpired", "RunFinished", "RunLocked", "SetupError", "StreamStalled",
        "TaskEnvironmentError", "TaskError", "TaskSpecError", "TaskTimeoutError", "UserError",
    ],
    "asynceval.evaluation": [
        "Dimension", "JudgePanel", "JudicialOpinion", "OpinionParseError", "PanelResult",
        "judicial_opinion_format", "judicial_opinions_format",
    ],
    "asynceval.events": [
        "REDACTED", "Observer", "add_observer", "bind_context", "configure_logging",
        "context_value", "emit", "redact_secrets", "register_secret", "remove_observer",
        "scrub_line", "write_failures",
    ],
    "asynceval.interop": [
        "FunnelTransport", "Httpx2FunnelTransport", "SyncFunnelTransport",
        "SyncHttpx2FunnelTransport", "anthropic_client", "base_url", "http_client",
        "openai_client", "sync_http_client",
    ],
    "asynceval.limits": [
        "ConcurrencyController", "ControllerStatistics", "CostBudget", "RateLimiter", "RetryPolicy",
        "Slot",
    ],
    "asynceval.llm": [
        "AnthropicChatModel", "ChatModel", "Completion", "Message", "Messages", "OpenAIChatModel",
        "ToolCall", "Usage", "UsageCounter", "current_usage", "response_format_for", "track_usage",
    ],
    "asynceval.runtime": ["CallCache", "Runtime", "from_thread"],
    "asynceval.sim": ["LatencyDistribution", "SimConfig", "SimProvider", "serve", "sim_app"],
    "asynceval.telemetry": [
        "EVALUATION_EVENT", "REPETITION_SPAN", "RETRY_EVENT", "RUN_SPAN", "Telemetry",
        "current_telemetry", "setup_from_env", "telemetry_scope",
    ],
    "asynceval.tools": ["ERROR_PREFIX", "Tool", "ToolExecutor"],
}  # fmt: skip
"""Every public package's `__all__`, as users see it: adding or removing a name is a change of
the public API, made here on purpose (and in the docs' reference, which follows `__all__`)."""

INTERNAL = {
    "asynceval.cli": "the command line is its interface (asynceval --help)",
    "asynceval.config": "Settings is public at the root",
    "asynceval.funnel": "every call's journey: reached through the models and asynceval.interop",
}
"""Top-level modules and packages that are not a public API of their own, and why."""


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's order for __all__: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _modules() -> list[ModuleType]:
    return [importlib.import_module(name) for name in SURFACE]


@pytest.mark.parametrize("name", sorted(SURFACE))
def test_each_public_package_exports_exactly_its_known_surface(name: str) -> None:
    assert list(importlib.import_module(name).__all__) == SURFACE[name]


def test_every_top_level_module_is_public_or_said_to_be_internal() -> None:
    """A new package or module under asynceval/ must join SURFACE or INTERNAL: none slips out
    unreviewed. Private ones (`_x`) and `__main__` are neither."""
    found = {
        f"asynceval.{info.name}"
        for info in pkgutil.iter_modules(asynceval.__path__)
        if not info.name.startswith("_")
    }
    assert found == (set(SURFACE) | set(INTERNAL)) - {"asynceval"}


def test_the_root_holds_what_a_benchmark_is_written_with() -> None:
    """About 25 names at the root: the ones a user writes in a benchmark."""
    assert 20 <= len(asynceval.__all__) <= 30
    for name in (
        "Benchmark", "Task", "TaskProtocol", "TimeoutAction", "TaskExecutionStatus",
        "TerminationReason", "SequentialQueue", "PriorityQueue", "AdaptiveQueue", "Settings",
        "Runtime", "OpenAIChatModel", "AnthropicChatModel", "Completion", "SyncAgent", "Tool",
        "ToolExecutor", "JudgePanel", "LLMCallFailed", "AsyncEvalError", "load_tasks",
        "current_context",
    ):  # fmt: skip
        assert name in asynceval.__all__, name
    assert sorted(dir(asynceval)) == sorted(asynceval.__all__)


def test_every_all_is_sorted_unique_public_and_importable() -> None:
    for module in _modules():
        names = list(module.__all__)
        assert names == sorted(names, key=_isort_key), module.__name__
        assert len(set(names)) == len(names), module.__name__
        for name in names:
            assert not name.startswith("_") or name == "__version__", (module.__name__, name)
            assert hasattr(module, name), (module.__name__, name)


def _moved_names() -> list[tuple[str, str, str]]:
    """(module, name, new home) for every name a public package keeps for one release."""
    return [
        (module.__name__, name, home)
        for module in _modules()
        for name, home in sorted(getattr(module, "_MOVED", {}).items())
    ]


@pytest.mark.parametrize(("module", "name", "home"), _moved_names())
def test_a_name_that_left_a_surface_still_works_with_one_deprecation_warning(
    module: str, name: str, home: str
) -> None:
    """Names moved off a package resolve for one release, each with one warning naming where
    they live now; they are no longer in its `__all__`."""
    assert name not in importlib.import_module(module).__all__
    home_module, _, attribute = home.partition(":")
    script = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    from {module} import {name} as value\n"
        f"import {home_module} as home\n"
        f"assert value is home.{attribute or name}\n"
        "messages = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "files = [w.filename for w in caught if w.category is DeprecationWarning]\n"
        "print(len(messages)); print(messages[0]); print(files[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    count, message, filename = done.stdout.splitlines()
    assert count == "1" and home_module in message and f"{module}.{name}" in message
    assert filename == "<string>"  # the warning points at the importing line


def test_shims_exist_for_what_this_release_moved() -> None:
    moved = {(module, name) for module, name, _ in _moved_names()}
    for module, name in [
        ("asynceval.llm", "Gateway"),
        ("asynceval.llm", "reclaiming_leases"),
        ("asynceval.runtime", "create_client"),
        ("asynceval.runtime", "transport_of"),
        ("asynceval.runtime", "process_writer"),
        ("asynceval.limits", "Reservation"),
        ("asynceval.distributed", "pickled_benchmark"),
        ("asynceval.tools", "TOOL_WAVE"),
        ("asynceval.evaluation", "refuses_structured_output"),
        ("asynceval", "RateLimiter"),
    ]:
        assert (module, name) in moved


def test_default_controller_is_now_the_runtimes_limiter() -> None:
    with pytest.warns(DeprecationWarning, match=r"Runtime.current\(\).limiter"):
        default_controller = asynceval.__getattr__("default_controller")
    assert default_controller() is asynceval.Runtime.current().limiter


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        asynceval.Nope  # noqa: B018


def test_every_exception_a_user_can_meet_is_in_one_tree() -> None:
    for module in _modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                assert issubclass(obj, asynceval.AsyncEvalError), (module.__name__, name)


def test_burst_example_shows_the_limit_held(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "burst.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "30 of 30 answered" in done.stdout
    assert "max in flight   : 5 by the controller, 5 replaying" in done.stdout
    assert "provider saw    : 5 at most in flight, 30 requests" in done.stdout


def test_sim_serve_bad_values_get_one_line_and_exit_2() -> None:
    for args in (["--fault", "x"], ["--fault", "503=2"], ["--latency", "-1"]):
        done = subprocess.run(
            [sys.executable, "-m", "asynceval.cli", "sim", "serve", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, args
        assert "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("asynceval")


def _drawn_tree() -> dict[str, str | None]:
    """{exception: its parent} as the tree in `asynceval.errors`' docstring draws it."""
    import asynceval.errors

    block = (asynceval.errors.__doc__ or "").split("```")[1]
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in block.strip().splitlines():
        name = line.lstrip("│├└─ ").split()[0]
        depth = 0 if name == line.split()[0] else (len(line) - len(line.lstrip("│├└─ "))) // 4
        del path[depth:]
        parents[name] = path[-1] if path else None
        path.append(name)
    return parents


def test_the_exception_tree_drawn_in_errors_is_complete_and_true() -> None:
    """Every exception `asynceval.errors` exports is drawn, under its nearest drawn ancestor."""
    import asynceval.errors

    drawn = _drawn_tree()
    exported = {
        name
        for name in asynceval.errors.__all__
        if isinstance(getattr(asynceval.errors, name), type)
    }
    assert set(drawn) == exported
    for name, parent in drawn.items():
        cls = getattr(asynceval.errors, name)
        ancestors = [c.__name__ for c in cls.__mro__[1:] if c.__name__ in drawn]
        assert (ancestors[0] if ancestors else None) == parent, name


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("asynceval.llm.gateway", ("Gateway", "MAX_REQUEUES", "UNSET")),
        ("asynceval.llm.usage", ("UsageCounter", "current_usage", "track_usage")),
    ],
)
def test_a_module_that_moved_still_imports_with_one_deprecation_warning(
    module: str, names: tuple[str, ...]
) -> None:
    script = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    from {module} import {', '.join(names)}\n"
        "print(sum(w.category is DeprecationWarning for w in caught))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


async def test_the_previous_gateway_spelling_still_makes_a_call() -> None:
    """`Gateway.for_runtime(runtime, endpoint=..., controller=...)` and `call(attempt)` without
    `usage_of`, as the previous release had them, for the one release the shim lasts."""
    import warnings

    from asynceval.limits import ConcurrencyController
    from asynceval.llm import Completion, Usage

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from asynceval.llm.gateway import Gateway

    controller = ConcurrencyController(2)
    gateway = Gateway.for_runtime(asynceval.Runtime(), endpoint="e", controller=controller)

    async def attempt(lease: object) -> Completion:
        return Completion(text="ok", usage=Usage(3, 1))

    with asynceval.llm.track_usage() as usage:
        result = await gateway.call(attempt, agent="old")
    assert result.text == "ok" and gateway.controller is controller
    assert (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens) == (1, 3, 1)
