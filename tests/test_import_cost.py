"""`import asynceval` loads what every run needs and leaves the rest to its first use: tenacity
(with tornado's modules when tornado is installed) waits for the first retry, the batch lane for
a route whose lane is batch, the task file readers for `load_tasks`, OpenTelemetry's set-up for
telemetry that is turned on, the judge panel (its pydantic models), tools and sync agents for a
benchmark that uses them. The names stay where they were."""

from __future__ import annotations

import json
import subprocess
import sys

LEFT_FOR_LATER = (
    "tenacity",
    "tornado",
    "asynceval.funnel._batch_lane",
    "asynceval.funnel._batch_call",
    "asynceval.funnel._batcher",
    "asynceval.engine.datasets",
    "asynceval.engine._dataset_rows",
    "asynceval.telemetry._setup",
    "asynceval.evaluation",
    "asynceval.tools",
    "asynceval.agents",
)


def modules_after(script: str) -> set[str]:
    """The modules a fresh interpreter holds once `script` has run."""
    probe = "import json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", f"{script}\n{probe}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(done.stdout))


def test_the_bare_import_leaves_retries_batches_task_files_and_otel_setup_out() -> None:
    loaded = modules_after("import asynceval")
    assert sorted(loaded & set(LEFT_FOR_LATER)) == []


def test_the_names_left_for_later_load_with_their_first_use() -> None:
    script = """
import asynceval
from asynceval import JudgePanel, SyncAgent, Tool, ToolExecutor, load_tasks
from asynceval.engine import iter_tasks
from asynceval.funnel import BatchLane, FileBatchJournal, LineResult, relayed_line
from asynceval.limits import RetryPolicy
from asynceval.telemetry import flush_if_set_up, setup_from_env
assert load_tasks.__module__ == iter_tasks.__module__ == "asynceval.engine.datasets"
assert BatchLane.__name__ == "BatchLane" and callable(relayed_line)
assert JudgePanel.__module__ == "asynceval.evaluation.panel"
assert (Tool.__name__, ToolExecutor.__name__, SyncAgent.__name__) == ("Tool", "ToolExecutor", "SyncAgent")
assert callable(setup_from_env) and callable(flush_if_set_up)
assert 1.0 <= RetryPolicy(initial_delay=1.0, jitter=0.0).delay(1) <= 1.0
"""
    loaded = modules_after(script)
    assert {"tenacity", "asynceval.funnel._batch_lane", "asynceval.engine.datasets"} <= loaded
    assert {"asynceval.evaluation", "asynceval.tools", "asynceval.agents"} <= loaded


def test_a_retried_call_still_waits_as_the_policy_says() -> None:
    from asynceval.limits import RetryPolicy

    policy = RetryPolicy(initial_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
