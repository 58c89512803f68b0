"""The public surface: about 25 root names, public submodules, deprecated root names still working."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import asynceval

ROOT = Path(__file__).parents[1]


PUBLIC_SUBMODULES = (
    "agents",
    "engine",
    "errors",
    "evaluation",
    "events",
    "limits",
    "llm",
    "runtime",
    "sim",
    "tools",
)


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's order for __all__: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _modules() -> list[ModuleType]:
    return [asynceval, *(importlib.import_module(f"asynceval.{m}") for m in PUBLIC_SUBMODULES)]


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


@pytest.mark.parametrize("name", sorted(asynceval._MOVED))
def test_a_dropped_root_name_still_works_with_one_deprecation_warning(name: str) -> None:
    """Names moved off the root resolve for one release, each with one warning naming its home."""
    home = asynceval._MOVED[name]
    script = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        f"    from asynceval import {name} as value\n"
        f"import asynceval.{home} as home\n"
        f"assert value is home.{name}\n"
        "messages = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "print(len(messages)); print(messages[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    count, message = done.stdout.splitlines()
    assert count == "1" and f"import it from asynceval.{home}" in message


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
