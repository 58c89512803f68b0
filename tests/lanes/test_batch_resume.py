"""Nothing billed is lost (DESIGN section 16): `asynceval run --lane batch` killed at any moment
(kill -9, or Ctrl-C with --keep-batches), then `asynceval run --resume DIR` against `asynceval sim
serve`: the resumed run re-attaches to the batches left open, so the provider saw each call's line
once, and every (task, repeat) ends with exactly one success."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).parents[2]
EXAMPLE = str(ROOT / "examples" / "arithmetic.py")
CALLS = 40  # examples/arithmetic.py: 40 tasks, one call each
AUTH = {"authorization": "Bearer k"}


def _env(base_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "LLM_BASE_URL": base_url,
        "LLM_MODEL": "asynceval-sim",
        "LLM_API_KEY": "k",
        "LLM_BATCH_LINGER": "0.1",
        "LLM_BATCH_POLL": "0.1",
    }


def _start(out: Path, base_url: str, *options: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "asynceval", "run", EXAMPLE, "--out", str(out), "--quiet"]
    return subprocess.Popen(
        [*command, "--lane", "batch", *options],
        env=_env(base_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_for(out: Path, event: str, run: subprocess.Popen[bytes], timeout: float = 60) -> None:
    events = out / "events.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if events.exists() and f'"{event}"' in events.read_text():
            return
        if run.poll() is not None:
            pytest.fail(f"the run ended (exit {run.returncode}) before {event}")
        time.sleep(0.02)
    run.kill()
    pytest.fail(f"no {event} within {timeout} s")


def _kill(run: subprocess.Popen[bytes]) -> None:
    run.kill()  # SIGKILL: nothing of the run's own runs
    run.communicate(timeout=30)


def _resume(out: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "asynceval", "run", "--resume", str(out), "--quiet"]
    return subprocess.run(
        command, env=_env(base_url), capture_output=True, text=True, timeout=180, check=False
    )


def _stats(base_url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
    return dict(stats["batches"]["openai"])


def _lines_sent(base_url: str) -> collections.Counter[str]:
    """How many times the provider was sent each question, over every batch it created."""
    listed = httpx.get(f"{base_url}/batches", params={"limit": 100}, headers=AUTH).json()
    sent: collections.Counter[str] = collections.Counter()
    for batch in listed["data"]:
        content = httpx.get(f"{base_url}/files/{batch['input_file_id']}/content", headers=AUTH)
        for raw in content.text.splitlines():
            if raw.strip():
                sent[json.loads(raw)["body"]["messages"][-1]["content"]] += 1
    return sent


def _events(out: Path, name: str) -> list[dict[str, Any]]:
    lines = (out / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if f'"{name}"' in line]


def _check_done(out: Path, base_url: str, *, sent_once: bool = True) -> None:
    """Every (task, repeat) has exactly one success; with `sent_once`, the provider was sent
    each call's line exactly once (its own count and the lines of its batches)."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    successes = collections.Counter(
        (row["task_id"], row["repeat_idx"]) for row in rows if row.get("status") == "success"
    )
    assert len(successes) == CALLS and set(successes.values()) == {1}, successes
    if sent_once:
        sent = _lines_sent(base_url)
        assert len(sent) == CALLS and set(sent.values()) == {1}, sent
        assert _stats(base_url)["lines"] == CALLS


def test_kill_9_once_a_batch_is_submitted_then_resume_sends_nothing_twice(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """kill -9 right after `batch_submitted`: the resume re-attaches to the open batch (found by
    its journaled id), collects it, and sends only the lines that were never sent."""
    base_url = sim_server("--batch-delay", "1")
    out = tmp_path / "run"
    run = _start(out, base_url)
    _wait_for(out, "batch_submitted", run)
    _kill(run)
    before = _stats(base_url)
    (submitted,) = _events(out, "batch_submitted")
    assert before["created"] == 1 and before["lines"] == submitted["requests"]

    resumed = _resume(out, base_url)
    assert resumed.returncode == 0, resumed.stderr
    _check_done(out, base_url)
    (reattached,) = _events(out, "batch_reattached")
    assert reattached["batch_id"] == submitted["batch_id"] and reattached["found"] == "journal"
    after = _stats(base_url)
    assert after["created"] == len(_events(out, "batch_submitted")) >= 2


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_at_a_random_moment_then_resume_sends_nothing_twice(
    sim_server: Callable[..., str], tmp_path: Path, seed: int
) -> None:
    """kill -9 at a random moment of the run (before, during or after its batches), then
    resume: nothing sent twice, each (task, repeat) one success."""
    base_url = sim_server("--batch-delay", "1")
    out = tmp_path / "run"
    run = _start(out, base_url)
    _wait_for(out, "run_started", run)
    time.sleep(random.Random(seed).uniform(0.0, 3.0))
    _kill(run)
    resumed = _resume(out, base_url)
    assert resumed.returncode == 0, resumed.stderr
    _check_done(out, base_url)


def _drop_created(out: Path, *, forget_key: bool = False) -> str:
    """Rewrite the run's batch journal as a kill between the intent and the provider's answer
    leaves it: the intent, no id. `forget_key`: the intent's key matches no batch at the provider
    (as if the creation never arrived). Returns the intent's key."""
    path = out / "batches.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (intent,) = [r for r in records if r["record"] == "intent"]
    if forget_key:
        intent["batch_key"] = "0" * 32
    path.write_text(json.dumps(intent) + "\n")
    return str(intent["batch_key"])


def test_an_intent_with_no_id_is_found_by_its_metadata(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """Killed after the batch was created but before its id was journaled: the resume finds it
    in the provider's list by `metadata.asynceval_batch_key` and sends none of its lines."""
    base_url = sim_server("--batch-delay", "1")
    out = tmp_path / "run"
    run = _start(out, base_url)
    _wait_for(out, "batch_submitted", run)
    _kill(run)
    (submitted,) = _events(out, "batch_submitted")
    key = _drop_created(out)

    resumed = _resume(out, base_url)
    assert resumed.returncode == 0, resumed.stderr
    _check_done(out, base_url)
    (reattached,) = _events(out, "batch_reattached")
    assert reattached["found"] == "metadata" and reattached["batch_key"] == key
    assert reattached["batch_id"] == submitted["batch_id"]
    journaled = (out / "batches.jsonl").read_text()
    assert f'"created","batch_key":"{key}","batch_id":"{submitted["batch_id"]}"' in journaled


def test_an_intent_that_never_became_a_batch_is_sent_again(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """An intent no batch at the provider carries (killed before the creation arrived): its
    lines are sent again (a `batch_reattached` WARNING, found "not_found"), each call once."""
    base_url = sim_server("--batch-delay", "1")
    out = tmp_path / "run"
    run = _start(out, base_url)
    _wait_for(out, "batch_submitted", run)
    _kill(run)
    _drop_created(out, forget_key=True)

    resumed = _resume(out, base_url)
    assert resumed.returncode == 0, resumed.stderr
    _check_done(out, base_url, sent_once=False)  # the faked intent's batch did exist
    (reattached,) = _events(out, "batch_reattached")
    assert reattached["found"] == "not_found" and reattached["level"] == "WARNING"


def test_a_kept_batch_is_collected_by_the_resume(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """--keep-batches and Ctrl-C: the open batch stays at the provider; the resume collects it
    without sending any of its lines again."""
    base_url = sim_server("--batch-delay", "2")
    out = tmp_path / "run"
    run = _start(out, base_url, "--keep-batches")
    _wait_for(out, "batch_submitted", run)
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=60)
    assert run.returncode == 130
    kept = [b["batch_id"] for b in _events(out, "batch_submitted")]
    listed = httpx.get(f"{base_url}/batches", headers=AUTH).json()["data"]
    assert {b["id"] for b in listed if b["status"] in ("validating", "in_progress")} == set(kept)

    resumed = _resume(out, base_url)
    assert resumed.returncode == 0, resumed.stderr
    _check_done(out, base_url)
    reattached = _events(out, "batch_reattached")
    assert sorted(r["batch_id"] for r in reattached) == sorted(kept)
