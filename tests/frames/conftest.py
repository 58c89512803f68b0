"""Real run directories for the frames tests, made once per session by `asynceval run` on the
embedded simulated provider: a run with retries, failed calls and an agent error, resumed
once; a batch-lane run; a run killed with SIGKILL mid-way (then resumed, in a copy)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from asynceval.cli import main

HERE = Path(__file__).parent
BENCH = str(HERE / "frames_bench.py")
ROOT = HERE.parents[1]
FAST_RETRIES = {"RETRY_INITIAL_DELAY": "0.001", "RETRY_MAX_DELAY": "0.002"}


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The whole JSON lines of a file, a line that is not JSON (cut short) left out."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def reports(run: Path) -> list[dict[str, Any]]:
    """The reports of a run directory's results file, in order."""
    return [r for r in json_lines(run / "results.jsonl") if r.get("type") != "header"]


@pytest.fixture(scope="session")
def mixed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mixed x 2 repeats (retries, calls failed for good, t5's agent raising), then resumed
    once with t5 fixed: two segments, errors run again, journal hits."""
    out = tmp_path_factory.mktemp("mixed") / "run"
    marker = out.parent / "fail-t5"
    marker.touch()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**FAST_RETRIES, "FRAMES_FAIL_MARKER": str(marker)}.items():
            patch.setenv(name, value)
        assert main(["run", f"{BENCH}:Mixed", "--repeats", "2", "--out", str(out), "--quiet"]) == 1
        marker.unlink()
        assert main(["run", "--resume", str(out), "--quiet", "--allow-errors"]) == 0
    return out


@pytest.fixture(scope="session")
def batch_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arithmetic example in the batch lane (40 calls in provider batches)."""
    out = tmp_path_factory.mktemp("batch") / "run"
    example = str(ROOT / "examples" / "arithmetic.py")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLM_BATCH_LINGER", "0.1")
        patch.setenv("LLM_BATCH_POLL", "0.1")
        assert main(["run", example, "--lane", "batch", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(killed, resumed): Slow killed by SIGKILL once 8 reports are written, each file then
    ending in a line cut short (as a kill during a write leaves it); and a copy of it resumed
    to its end."""
    base = tmp_path_factory.mktemp("killed")
    killed = base / "killed"
    command = [sys.executable, "-m", "asynceval", "run", f"{BENCH}:Slow", "--out", str(killed)]
    process = subprocess.Popen(
        [*command, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        results = killed / "results.jsonl"
        while not (results.exists() and results.read_text().count("\n") > 8):
            assert time.monotonic() < deadline and process.poll() is None, "no reports"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    for name, cut in (
        ("results.jsonl", '{"run_id": "x", "task_id": "slo'),
        ("events.jsonl", '{"ev'),
    ):
        with open(killed / name, "a", encoding="utf-8") as file:
            file.write(cut)
    resumed = base / "resumed"
    shutil.copytree(killed, resumed)
    assert main(["run", "--resume", str(resumed), "--quiet"]) == 0
    return killed, resumed
