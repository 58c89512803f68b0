"""The framework examples (examples/frameworks/), each run as `asynceval run` in a subprocess
against a loopback simulated provider: its `/stats` witnesses the requests in flight on its side
of the wire, and the run's events.jsonl and results.jsonl show the funnel's events and usage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval.engine import read_records

FRAMEWORKS = Path(__file__).parents[2] / "examples" / "frameworks"
EXAMPLES = [
    "openai_sdk_async",
    "openai_sdk_sync",
    "openai_agents",
    "openai_agents_chat",
    "pydantic_ai_agent",
    "langchain_agent",
    "smolagents_agent",
]
AGENT = "solver"  # the name every example gives its client
N_TASKS = 20
LIMIT = 5

Run = tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]


def run_example(name: str, base_url: str, tmp_path: Path, env: dict[str, str] | None = None) -> Run:
    """(reports, events, the server's /stats) of one `asynceval run` of examples/frameworks/NAME.py."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "asynceval", "run", str(FRAMEWORKS / f"{name}.py"),
         "--out", str(out), "--quiet", "--max-concurrent-llm-calls", str(LIMIT),
         "--base-url", base_url],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records, damaged = read_records(out / "results.jsonl")
    assert damaged == 0
    assert records[0]["type"] == "header"
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    stats = httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=5).json()
    return records[1:], events, stats


def assert_all_succeeded(reports: list[dict[str, Any]]) -> None:
    """20 repetitions, every one a success that counted its LLM calls and tokens."""
    assert len(reports) == N_TASKS
    for report in reports:
        assert report["status"] == "success", report["error"]
        assert report["usage"]["llm_calls"] >= 1, report["usage"]
        assert report["usage"]["prompt_tokens"] > 0, report["usage"]


def named(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event"] == name]


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_holds_the_limit_on_the_wire(
    name: str, sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server("--latency", "0.05")
    reports, events, stats = run_example(name, base_url, tmp_path)
    assert_all_succeeded(reports)
    # the server saw the limit held, and real concurrency under it
    assert 2 <= stats["max_in_flight"] <= LIMIT, stats
    assert stats["requests"] >= N_TASKS, stats
    acquired, released = named(events, "acquired"), named(events, "released")
    assert len(acquired) == len(released) == stats["requests"], (len(acquired), stats)
    assert {event["agent"] for event in acquired + released} == {AGENT}
    calls = sum(report["usage"]["llm_calls"] for report in reports)
    assert calls == len(acquired)


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_rides_out_a_429_storm(
    name: str, sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server("--latency", "0.02", "--fault", "429=0.3", "--retry-after", "0.05")
    env = {"RETRY_MAX_ATTEMPTS": "10", "RETRY_INITIAL_DELAY": "0.01"}
    reports, events, stats = run_example(name, base_url, tmp_path, env)
    assert_all_succeeded(reports)
    assert stats["max_in_flight"] <= LIMIT, stats
    retries = [event for event in named(events, "retry") if event["status_code"] == 429]
    assert retries, "no 429 retry in events.jsonl"
    assert {event["agent"] for event in retries} == {AGENT}
    assert sum(report["usage"]["retries"] for report in reports) == len(retries)
    assert stats["statuses"].get("429", 0) == len(retries), stats
