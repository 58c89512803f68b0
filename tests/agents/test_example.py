"""examples/smolagents_agent.py runs as `asynceval run` on the embedded simulated provider."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_smolagents_example_runs_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "asynceval.cli", "run", str(ROOT / "examples" / "smolagents_agent.py"),
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout == f"results: {out}\n"
    )  # --quiet; the example prints nothing, smolagents neither
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    reports = [r for r in records if r.get("type") != "header"]
    assert sorted(r["task_id"] for r in reports) == ["france", "japan", "kenya", "peru"]
    assert all(r["status"] == "success" for r in reports)
    assert all(r["usage"]["llm_calls"] == 2 for r in reports)  # a tool step, then the answer
    assert all(r["eval"][0]["answer"].startswith("Simulated answer:") for r in reports)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    acquired = [e for e in events if e["event"] == "acquired"]
    assert len(acquired) == 8 and {e["agent"] for e in acquired} == {"geographer"}
