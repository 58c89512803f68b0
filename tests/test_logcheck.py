"""`logs check` and adaptive limits: an endpoint's limit may move, the run's cap may not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from asynceval.analysis.logcheck import check_events

CAPPED_TARGET = """
from asynceval import Benchmark, OpenAIChatModel
from asynceval.sim import SimConfig

# One provider serving 4 calls at once, shared by every task (built at import time, under
# the runtime the CLI installs first).
MODEL = OpenAIChatModel(sim_config=SimConfig(latency=0.02, max_concurrency=4, retry_after=0.05))


class Capped(Benchmark):
    def default_tasks(self):
        return [{"query": f"What is {i} + 1?", "id": f"t{i}"} for i in range(60)]

    async def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            return (await MODEL.generate(query)).text

        return [agent], {}


benchmark = Capped
"""


def _run(calls: int, limit: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"event": "run_started", "max_concurrent_llm_calls": limit}]
    for index in range(calls):
        events += [
            {"event": "acquired", "call_id": f"c{index}"},
            {"event": "released", "call_id": f"c{index}"},
        ]
    return events


def test_adaptive_limits_within_the_cap_hold() -> None:
    events = _run(3, 8)
    events.insert(2, {"event": "limit_changed", "limit": 4, "previous": 8, "cap": 8})
    events.insert(4, {"event": "limit_changed", "limit": 5, "previous": 4, "cap": 8})
    check = check_events(events)
    assert check.ok and check.limit_changes == 2 and check.lowest_endpoint_limit == 4


def test_an_adaptive_limit_above_the_cap_or_a_changed_cap_is_a_violation() -> None:
    above = _run(3, 8)
    above.insert(2, {"event": "limit_changed", "limit": 9, "previous": 8, "cap": 8})
    assert not check_events(above).limit_held
    moved = _run(3, 8)
    moved.insert(2, {"event": "limit_changed", "limit": 7, "previous": 8, "cap": 10})
    assert not check_events(moved).limit_held


def test_a_cli_run_against_a_capped_provider_checks_out(tmp_path: Path) -> None:
    """Limit 8 against a provider serving 4: every task succeeds, the endpoint's limit moved
    and stayed within the cap, and `logs check` says so."""
    target = tmp_path / "capped.py"
    target.write_text(textwrap.dedent(CAPPED_TARGET))
    env = {**os.environ, "RETRY_MAX_ATTEMPTS": "2", "RETRY_INITIAL_DELAY": "0.01"}
    cli = [sys.executable, "-m", "asynceval"]
    run = subprocess.run(
        [*cli, "run", str(target), "--out", "out", "--quiet", "--max-concurrent-llm-calls", "8"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    reports = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    statuses = {r["status"] for r in reports if "status" in r}
    assert statuses == {"success"}
    done = subprocess.run(
        [*cli, "logs", "check", "out", "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    check = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert check["ok"] and check["limit"] == 8 and check["max_in_flight"] <= 8
    assert check["limit_changes"] >= 1 and 1 <= check["lowest_endpoint_limit"] <= 4
    assert check["retries_by_status"].get("429", 0) >= 1 and check["failed_calls"] == 0


def _call(name: str, call_id: str, at: str, worker: str | None) -> dict[str, Any]:
    event = {"event": name, "call_id": call_id, "timestamp": f"2026-01-01T00:00:{at}Z"}
    return event if worker is None else {**event, "worker": worker}


def test_a_cluster_runs_events_are_replayed_in_time_order() -> None:
    """Limit 1 on two workers: B's `acquired` arrived before A's `released` that made room for
    it, but happened after it. Replayed by time the limit held; the same lines written by one
    process (no `worker`) are taken in file order, and there they break it."""
    start = {"event": "run_started", "max_concurrent_llm_calls": 1}
    lines = [
        ("acquired", "a", "00.100000", "A"),
        ("acquired", "b", "00.300000", "B"),  # arrived first ...
        ("released", "a", "00.290000", "A"),  # ... but A freed the slot 10 ms before
        ("released", "b", "00.500000", "B"),
    ]
    cluster = check_events([start, *(_call(*line) for line in lines)])
    assert cluster.max_in_flight == 1 and cluster.limit_held
    local = check_events([start, *(_call(n, c, t, None) for n, c, t, _ in lines)])
    assert local.max_in_flight == 2 and not local.limit_held


def test_a_release_and_an_acquire_at_the_same_instant_count_the_release_first() -> None:
    """Two workers' clocks give A's `released` and B's `acquired` the same timestamp, B's line
    arriving first: on a tie the release is replayed first, so the limit of 1 held."""
    start = {"event": "run_started", "max_concurrent_llm_calls": 1}
    lines = [
        ("acquired", "a", "00.100000", "A"),
        ("acquired", "b", "00.290000", "B"),
        ("released", "a", "00.290000", "A"),
        ("released", "b", "00.500000", "B"),
    ]
    replay = check_events([start, *(_call(*line) for line in lines)])
    assert replay.max_in_flight == 1 and replay.limit_held


def test_a_run_that_bypassed_the_funnel_is_checked_on_its_funnel_calls_only() -> None:
    """`funnel_bypassed` makes the verdict cover only the funnel's calls (the run it is in,
    not the one before); calls whose events carry `sdk_retry` are counted once each."""
    clean = _run(2, 4)
    bypassed = _run(3, 4)
    bypassed[1]["sdk_retry"] = 1  # the acquired of c0: an SDK's retry, sent again by us
    bypassed[3:3] = [{"event": "acquired", "call_id": "c1", "sdk_retry": 2}]
    bypassed[4:4] = [{"event": "released", "call_id": "c1", "sdk_retry": 2}]
    bypassed.append({"event": "funnel_bypassed", "count": 2, "clients": ["a", "b"]})
    check = check_events(clean + bypassed)
    assert check.ok and check.funnel_only
    assert check.bypassed_clients == 2 and check.sdk_retry_calls == 2
    assert [run["funnel_bypassed"] for run in check.runs] == [0, 2]
    assert check.as_dict()["funnel_only"] is True
    alone = check_events(clean)
    assert not alone.funnel_only and alone.sdk_retry_calls == 0


def test_a_resumed_runs_calls_answered_from_batches_it_took_over_are_counted(
    tmp_path: Path,
) -> None:
    """A resumed run whose calls were all answered from a batch an earlier run left open made
    no call that held a slot: its log is still checkable (those calls held no slot), and says
    how many calls the batches it took over answered."""
    header = {"event": "run_started", "run_id": "r2", "max_concurrent_llm_calls": 4}
    reattached = {
        "event": "batch_reattached", "run_id": "r2", "provider": "openai", "endpoint": "e",
        "batch_key": "k", "batch_id": "batch_1", "requests": 40, "found": "journal",
    }  # fmt: skip
    lost = {**reattached, "batch_key": "k2", "batch_id": None, "found": "not_found"}
    finished = {"event": "run_finished", "run_id": "r2"}
    check = check_events([header, reattached, lost, finished])
    assert check.checkable and check.ok, check.cannot_check
    assert check.batch_calls == 40 and check.batches_reattached == 1 and check.batches == 0
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [header, reattached, lost, finished]))
    done = subprocess.run(
        [sys.executable, "-m", "asynceval", "logs", "check", str(log)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "40 more holding no slot (40 in provider batches)" in done.stdout
    assert "batches           0 created, 1 taken over from an earlier run" in done.stdout


def test_a_batch_taken_over_is_counted_once_with_the_run_that_sent_it() -> None:
    """The log of a run killed with a batch open and of its resume: the batch's 40 lines are
    the first run's calls (its `batch_submitted`) and answer the resumed run's: 40 in all."""
    first = [
        {"event": "run_started", "run_id": "r1", "max_concurrent_llm_calls": 4},
        {"event": "batch_submitted", "run_id": "r1", "provider": "openai", "endpoint": "e",
         "batch_id": "batch_1", "requests": 40, "call_ids": [f"c{i}" for i in range(40)]},
    ]  # fmt: skip
    resumed = [
        {"event": "run_started", "run_id": "r2", "max_concurrent_llm_calls": 4},
        {"event": "batch_reattached", "run_id": "r2", "provider": "openai", "endpoint": "e",
         "batch_key": "k", "batch_id": "batch_1", "requests": 40, "found": "journal"},
        {"event": "run_finished", "run_id": "r2"},
    ]  # fmt: skip
    check = check_events(first + resumed)
    assert check.batch_calls == 40 and check.batches == 1 and check.batches_reattached == 1
    assert check_events(resumed).batch_calls == 40  # the resume's log alone: its 40 answers
