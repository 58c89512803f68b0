"""A run whose agent's calls went around the funnel says so, and `logs check` says its verdict
covers only the funnel's calls; a run whose clients are all on the funnel says nothing."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

from asynceval import Benchmark, Settings, Task
from asynceval.interop import openai_client
from asynceval.sim import SimConfig, SimProvider

LoopBack = Callable[[SimConfig], tuple[str, SimProvider]]
ASK: dict[str, Any] = {"model": "asynceval-sim", "messages": [{"role": "user", "content": "hi"}]}


class MixedBench(Benchmark):
    """Each task's agent makes one call through the funnel and, when `around` is set, one more
    through a plain AsyncOpenAI client on its own HTTP client (the benchmark's, made once)."""

    def __init__(self, url: str, around: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url
        self.plain = openai.AsyncOpenAI(base_url=url, api_key="k") if around else None

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        funnel = openai_client(base_url=self.url)
        plain = self.plain

        async def solver(query: str) -> str:
            await funnel.chat.completions.create(**ASK)
            if plain is not None:
                await plain.chat.completions.create(**ASK)
            return "done"

        return [solver], {}


def logs_check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynceval.cli", "logs", "check", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def named(folder: Path, name: str) -> list[dict[str, Any]]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


async def test_a_run_whose_agent_bypassed_the_funnel_warns_and_logs_check_says_so(
    loopback: LoopBack, tmp_path: Path
) -> None:
    url, sim = loopback(SimConfig(latency=0.05))
    settings = Settings(max_concurrent_llm_calls=2)
    tasks = [Task(query=f"q{i}", id=f"t{i}") for i in range(6)]
    gc.collect()  # clients other tests left unreferenced are not this run's

    funnel_only = tmp_path / "funnel-only"
    await MixedBench(url, False, settings=settings, max_concurrent_tasks=6).run(
        tasks, results_path=funnel_only / "results.jsonl"
    )
    assert sim.stats()["requests"] == 6
    assert not named(funnel_only, "funnel_bypassed")
    clean = logs_check(funnel_only)
    assert clean.returncode == 0 and "funnel" not in clean.stdout.replace("funnel_", ""), clean

    around = tmp_path / "around"
    bench = MixedBench(url, True, settings=settings, max_concurrent_tasks=6)
    await bench.run(tasks, results_path=around / "results.jsonl")
    assert sim.stats()["requests"] == 6 + 12  # 6 more through the funnel, 6 around it
    [warning] = named(around, "funnel_bypassed")
    assert warning["level"] == "WARNING" and warning["count"] == 1
    assert warning["clients"] == [f"AsyncOpenAI(base_url={url}/, transport=AsyncHTTPTransport)"]
    [finished] = named(around, "run_finished")
    assert finished["timestamp"] >= warning["timestamp"]  # written as the run ended
    checked = logs_check(around)
    assert "funnel bypassed   1 SDK client(s) sent around the funnel" in checked.stdout, checked
    assert "covers only the calls that went through the funnel" in checked.stdout
    assert checked.stdout.rstrip().endswith("OK (funnel calls only)"), checked.stdout
