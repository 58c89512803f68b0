"""Anthropic's crash window (DESIGN section 16, "Nothing billed is lost"): a run killed after
asking Anthropic for a batch and before its id was journaled. Anthropic's batches carry no key
of ours, so the resumed run takes the one batch at the provider that can be the intent's (its
time and size), checks its answers bear the intent's custom_ids, and collects it: nothing sent
twice. A batch whose answers are another's is not taken: its lines go again."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

CALLS = 20

TARGET = f"""
from asynceval import AnthropicChatModel, Benchmark, Task


class Sums(Benchmark):
    def default_tasks(self):
        return [Task(query=f"What is {{i}} + 3?", id=f"t{{i:02d}}") for i in range({CALLS})]

    async def setup_agents(self, agent_data, environment, task, user):
        model = AnthropicChatModel("claude-sim")

        async def agent(query):
            return (await model.generate(query, max_tokens=16)).text

        return [agent], {{}}


benchmark = Sums
"""


def _env(base_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "LLM_BASE_URL": base_url,
        "LLM_API_KEY": "k",
        "LLM_BATCH_LINGER": "0.1",
        "LLM_BATCH_POLL": "0.1",
    }


def _run(target: Path, out: Path, base_url: str, *extra: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "asynceval", "run", *extra, "--quiet", "--lane", "batch"]
    if "--resume" not in extra:
        command[4:4] = [str(target), "--out", str(out)]
    return subprocess.Popen(
        command, env=_env(base_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _killed_after_submitting(tmp_path: Path, base_url: str) -> Path:
    target, out = tmp_path / "sums.py", tmp_path / "run"
    target.write_text(TARGET)
    run = _run(target, out, base_url)
    events = out / "events.jsonl"
    deadline = time.monotonic() + 60
    while not (events.exists() and '"batch_submitted"' in events.read_text()):
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            pytest.fail(f"no batch was submitted: {run.communicate()[1].decode()[-2000:]}")
        time.sleep(0.02)
    run.kill()  # SIGKILL: nothing of the run's own runs
    run.communicate(timeout=30)
    return out


def _forget_the_id(out: Path, *, other_ids: bool = False) -> dict[str, Any]:
    """The batch journal as a kill between the request and its answer leaves it: the intent
    only. `other_ids`: its lines' custom_ids changed, so that the provider's batch is not its."""
    path = out / "batches.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (intent,) = [r for r in records if r["record"] == "intent"]
    if other_ids:
        intent["custom_ids"] = [f"x{cid}" for cid in intent["custom_ids"]]
        intent["keys"] = {f"x{cid}": pair for cid, pair in intent["keys"].items()}
    path.write_text(json.dumps(intent) + "\n")
    return dict(intent)


def _resume(out: Path, base_url: str) -> tuple[int, str]:
    run = _run(Path(), out, base_url, "--resume", str(out))
    _, stderr = run.communicate(timeout=180)
    return run.returncode, stderr.decode()


def _anthropic(base_url: str) -> dict[str, Any]:
    stats = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
    return dict(stats["batches"]["anthropic"])


def _successes(out: Path) -> collections.Counter[str]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return collections.Counter(r["task_id"] for r in rows if r.get("status") == "success")


def _reattached(out: Path) -> list[dict[str, Any]]:
    lines = (out / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if '"batch_reattached"' in line]


def test_a_batch_whose_id_was_never_journaled_is_found_by_its_time_and_size(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server("--batch-delay", "1")
    out = _killed_after_submitting(tmp_path, base_url)
    first = _anthropic(base_url)
    intent = _forget_the_id(out)

    code, stderr = _resume(out, base_url)
    assert code == 0, stderr
    (reattached,) = _reattached(out)
    assert reattached["found"] == "matched" and reattached["requests"] == len(intent["keys"])
    assert _anthropic(base_url)["lines"] == CALLS  # each call's line sent once, in all
    assert first["lines"] == len(intent["keys"])
    successes = _successes(out)
    assert len(successes) == CALLS and set(successes.values()) == {1}, successes
    journaled = (out / "batches.jsonl").read_text()
    assert f'"created","batch_key":"{intent["batch_key"]}"' in journaled


def test_a_batch_whose_answers_are_anothers_is_not_taken(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server("--batch-delay", "1")
    out = _killed_after_submitting(tmp_path, base_url)
    intent = _forget_the_id(out, other_ids=True)

    code, stderr = _resume(out, base_url)
    assert code == 0, stderr
    found = [r["found"] for r in _reattached(out)]
    assert found == ["matched", "not_found"], found  # taken, then its answers told otherwise
    assert _anthropic(base_url)["lines"] == CALLS + len(intent["keys"])  # its lines went again
    successes = _successes(out)
    assert len(successes) == CALLS and set(successes.values()) == {1}, successes
