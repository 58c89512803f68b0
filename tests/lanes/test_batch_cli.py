"""`asynceval run --lane batch` from a shell against `asynceval sim serve`: Ctrl-C cancels the
run's open batch at the provider; with --keep-batches it is left running for a resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).parents[2]


def _batches(base_url: str) -> list[dict[str, object]]:
    listed = httpx.get(f"{base_url}/batches", headers={"authorization": "Bearer k"}).json()
    data: list[dict[str, object]] = listed["data"]
    return data


def _interrupt_once_submitted(out: Path, base_url: str, *options: str) -> int:
    env = {
        **os.environ,
        "LLM_BASE_URL": base_url,
        "LLM_MODEL": "asynceval-sim",
        "LLM_API_KEY": "k",
        "LLM_BATCH_LINGER": "0.1",
        "LLM_BATCH_POLL": "0.1",
    }
    example = str(ROOT / "examples" / "arithmetic.py")
    command = [sys.executable, "-m", "asynceval", "run", example, "--out", str(out)]
    run = subprocess.Popen(
        [*command, "--quiet", "--lane", "batch", *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    events = out / "events.jsonl"
    while time.monotonic() < deadline:
        if events.exists() and '"batch_submitted"' in events.read_text():
            break
        time.sleep(0.05)
    else:
        run.kill()
        pytest.fail("no batch was submitted")
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=30)
    return run.returncode


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_cancels_the_open_batch_unless_kept(
    sim_server: Callable[..., str], tmp_path: Path, keep: bool
) -> None:
    base_url = sim_server("--batch-delay", "60")
    options = ("--keep-batches",) if keep else ()
    assert _interrupt_once_submitted(tmp_path / "run", base_url, *options) == 130
    time.sleep(0.2)
    (batch,) = _batches(base_url)
    running, cancelled = {"validating", "in_progress"}, {"cancelling", "cancelled"}
    assert batch["status"] in (running if keep else cancelled)
    submitted = [
        json.loads(line)
        for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()
        if '"batch_submitted"' in line
    ]
    assert [s["batch_id"] for s in submitted] == [batch["id"]]
