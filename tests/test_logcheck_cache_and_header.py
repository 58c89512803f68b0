"""`logs check` counts answers from the cache or the journal as calls that held no slot, and
cannot say the limit held on a log that never says the limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def _check(
    tmp_path: Path, lines: list[dict[str, Any]], *args: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return subprocess.run(
        [sys.executable, "-m", "asynceval.cli", "logs", "check", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


HEADER = {"event": "run_started", "max_concurrent_llm_calls": 2}


def test_a_run_answered_wholly_from_the_cache_is_ok(tmp_path: Path) -> None:
    hits = [{"event": "cache_hit", "call_id": f"c{n}"} for n in range(3)]
    hits.append({"event": "journal_hit", "call_id": "j1"})
    done = _check(tmp_path, [HEADER, *hits])
    assert done.returncode == 0, done.stdout
    assert "4 more holding no slot (3 from the cache, 1 from the journal)" in done.stdout
    assert "outside the funnel" not in done.stdout and done.stdout.strip().endswith("OK")


def test_a_log_without_a_run_header_or_limit_cannot_be_checked(tmp_path: Path) -> None:
    calls = [
        {"event": "acquired", "call_id": "a", "wait_s": 0.0},
        {"event": "released", "call_id": "a", "held_s": 0.1},
    ]
    done = _check(tmp_path, calls)
    assert done.returncode == 1
    assert "cannot check: no run header" in done.stdout and "CANNOT CHECK" in done.stdout
    assert _check(tmp_path, calls, "--limit", "1").returncode == 0
