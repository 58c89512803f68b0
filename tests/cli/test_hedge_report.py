"""A hedged run seen from outside: `asynceval run` with LLM_HEDGE, then `report` and `logs check`
as a user runs them. A hedge is an extra request of the same call: the run's LLM calls stay one
per task, the report counts the extra requests apart, and the limit proof covers them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ._shell import asynceval

HERE = Path(__file__).parent


def test_a_hedged_run_counts_each_call_once_and_its_hedges_apart(tmp_path: Path) -> None:
    shutil.copy(HERE / "hedged_bench.py", tmp_path)
    env = {
        "LLM_HEDGE": "0.05",
        "LLM_HEDGE_BUDGET": "1",
        "MAX_CONCURRENT_LLM_CALLS": "10",
        "MAX_CONCURRENT_TASKS": "6",  # slots to spare: a hedge never waits in line
    }
    run = asynceval("run", "hedged_bench.py", "--out", "d", "--quiet", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in (tmp_path / "d" / "events.jsonl").open()]
    sent = [e for e in events if e["event"] == "hedge_sent"]
    assert sent, "no call was hedged"
    assert all(e["hedge_call_id"] == e["call_id"] + "-h" for e in sent)

    report = asynceval("report", "d", "--json", cwd=tmp_path)
    summary = json.loads(report.stdout)
    assert summary["llm_calls"] == 60  # one call per task, hedged or not
    assert summary["hedges"] == len(sent)
    shown = asynceval("report", "d", cwd=tmp_path)
    assert f"{len(sent)} extra requests" in shown.stdout

    check = asynceval("logs", "check", "d", cwd=tmp_path)
    assert check.returncode == 0, check.stdout
    assert "OK" in check.stdout
