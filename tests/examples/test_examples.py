"""The seed-scenario examples, each run as `asynceval run examples/NAME.py` in a subprocess on the
embedded simulated provider; the checks read the files the run wrote (results.jsonl, events.jsonl).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from asynceval.engine import read_records

EXAMPLES = Path(__file__).parents[2] / "examples"


def run_example(
    name: str, tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(reports, events) of one `asynceval run examples/NAME.py --quiet` in `tmp_path`."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "asynceval", "run", str(EXAMPLES / f"{name}.py"),
         "--out", str(out), "--quiet", "--allow-errors"],  # multi_turn times out on purpose
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records, damaged = read_records(out / "results.jsonl")
    assert damaged == 0
    assert records[0]["type"] == "header"
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    return records[1:], events


def at(event: dict[str, Any]) -> float:
    """An event's timestamp in seconds."""
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def test_multi_turn_shows_every_termination_reason_repeats_and_timeouts(tmp_path: Path) -> None:
    reports, events = run_example("multi_turn", tmp_path)
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for report in reports:
        by_task[report["task_id"]].append(report)

    # every task twice
    assert len(by_task) == 7
    for task_reports in by_task.values():
        assert sorted(r["repeat_idx"] for r in task_reports) == [0, 1]

    reasons = {r["termination_reason"] for r in reports}
    assert {"agent_stop", "user_stop", "max_steps"} <= reasons
    expected = {
        "one-question": "user_stop",
        "two-questions": "user_stop",
        "off-topic": "agent_stop",
        "drifts-off-topic": "agent_stop",
        "too-many-questions": "max_steps",
    }
    for task_id, reason in expected.items():
        for report in by_task[task_id]:
            assert report["status"] == "success", report["error"]
            assert report["termination_reason"] == reason, task_id
            assert report["attempts"] == 1
    # max_steps keeps status success and the evaluator runs: the user was cut off
    for report in by_task["too-many-questions"]:
        (entry,) = report["eval"]
        assert entry == {"passed": False, "answered": 3, "questions": 4}
    for report in by_task["drifts-off-topic"]:
        assert report["usage"]["llm_calls"] == 2  # answered one, declined the next

    # the slow assistant always overruns its first attempt: EXTEND and RETRY re-run it
    assert any(r["attempts"] == 2 or r["status"] == "task_timeout" for r in reports)
    for report in by_task["slow-extend"] + by_task["slow-retry"]:
        assert report["attempts"] == 2
    for report in by_task["slow-retry"]:  # the same timeout again: overruns again
        assert report["status"] == "task_timeout" and report["termination_reason"] is None
        assert report["error"]["type"] == "TaskTimeoutError"

    # the PriorityQueue started the high-priority (slow) tasks first
    started = [e["task_id"] for e in events if e["event"] == "task_started"]
    assert {started[0], started[1]} <= {"slow-extend", "slow-retry"}


def test_parallel_tools_overlap_reads_and_order_the_write_before_the_read(tmp_path: Path) -> None:
    reports, events = run_example("parallel_tools", tmp_path, env={"LOG_LEVEL": "DEBUG"})
    assert len(reports) == 4
    read_only = ("get_weather", "get_population", "lookup_time")
    for report in reports:
        assert report["status"] == "success", report["error"]
        assert report["eval"][0]["passed"] is True
        assert report["usage"]["llm_calls"] == 2  # the tool calls, then the answer
        log = report["traces"]["environment"]["tool_events"]
        order = [(e["event"], e["tool"]) for e in log]
        assert len(order) == 10
        # the read-only lookups overlap: all started before any of them ended
        last_start = max(order.index(("start", tool)) for tool in read_only)
        first_end = min(order.index(("end", tool)) for tool in read_only)
        assert last_start < first_end, order
        # the write to "notes" ended before the read of "notes" started, and the read saw it
        assert order.index(("end", "write_note")) < order.index(("start", "read_notes")), order
        assert report["traces"]["environment"]["notes"]
        # the sync tool ran in a worker thread
        assert {e["thread"] for e in log if e["tool"] == "lookup_time"} != {"MainThread"}

    waves = [e for e in events if e["event"] == "tool_wave"]
    assert len(waves) == 2 * len(reports)
    for report in reports:
        first, second = [w for w in waves if w["task_id"] == report["task_id"]]
        assert first["concurrent"] is True
        assert set(read_only) <= set(first["tools"])
        assert first["reason"] == "conflict" and first["next_tool"] == "read_notes"
        assert first["resources"] == ["notes"]
        assert second["tools"] == ["read_notes"]


def test_sync_solver_calls_from_worker_threads_with_a_rate_limit_set(tmp_path: Path) -> None:
    """The example's calls from worker threads, with its RPM setting in force. (That the window
    holds at the provider, the first minute included, is tests/llm/test_provider_limits.py's:
    this run's 128 calls fit in one minute's budget of 200, so it could not show it.)"""
    reports, events = run_example("sync_solver", tmp_path)
    assert reports
    for report in reports:
        assert report["status"] == "success", report["error"]
        assert report["eval"][0]["passed"] is True
        assert report["usage"]["llm_calls"] >= 2
        solver = report["traces"]["agents"]["solver"]
        assert len(solver["calls"]) == report["usage"]["llm_calls"]
        assert solver["threads"] and "MainThread" not in solver["threads"]

    (started,) = [e for e in events if e["event"] == "run_started"]
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    limit = started["llm_requests_per_minute"]
    acquired = sorted(at(e) for e in events if e["event"] == "acquired")
    assert limit == 200 and len(acquired) == sum(r["usage"]["llm_calls"] for r in reports)
    assert len(acquired) <= limit  # so the budget never made a call wait a minute:
    assert finished["duration_s"] < 30
