"""The public surface: one sorted `__all__`, every name importable from the top level."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import asynceval
import asynceval.engine
import asynceval.sim

ROOT = Path(__file__).parents[1]


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's order for __all__: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def test_all_is_sorted_and_importable() -> None:
    for module in (asynceval, asynceval.engine, asynceval.sim):
        assert list(module.__all__) == sorted(module.__all__, key=_isort_key)
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), name


def test_contract_names_are_exported() -> None:
    for name in (
        "AnthropicChatModel", "ConcurrencyController", "LLMCallFailed", "OpenAIChatModel",
        "RateLimiter", "RetryPolicy", "Settings", "configure_logging", "Benchmark", "Task",
        "TaskProtocol", "TimeoutAction", "TaskExecutionStatus", "TerminationReason",
        "SequentialQueue", "PriorityQueue", "AdaptiveQueue", "ComponentRegistry",
        "BenchmarkCallback", "TaskContext", "TaskTimeoutError", "AgentError",
        "TaskEnvironmentError", "UserError",
    ):  # fmt: skip
        assert name in asynceval.__all__


def test_errors_have_one_root() -> None:
    for name in asynceval.__all__:
        obj = getattr(asynceval, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, asynceval.AsyncEvalError), name


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
