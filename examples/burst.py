"""The seed scenario: 3 judge agents x 10 dimensions = 30 LLM calls fired at once, limit 5.

Runs on the embedded simulated provider unless LLM_BASE_URL (and LLM_MODEL, LLM_API_KEY) say
otherwise. Events go to LOG_FILE (default: results/burst-events.jsonl); at the end the script replays
them and prints what the limit did.

    python examples/burst.py
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import anyio
import anyio.to_thread

from asynceval import OpenAIChatModel, Runtime, Settings, configure_logging

AGENTS = ["judge-strict", "judge-lenient", "judge-expert"]
DIMENSIONS = [
    "accuracy", "completeness", "clarity", "relevance", "conciseness",
    "coherence", "safety", "helpfulness", "style", "grounding",
]  # fmt: skip
ANSWER = "Paris is the capital of France; it has been since 508 AD."


def replay(path: Path, since: int) -> tuple[int, list[float], int]:
    """Max in flight from acquired/released, queue waits, and retries, for lines after `since`."""
    in_flight = peak = retries = 0
    waits: list[float] = []
    for line in path.read_text().splitlines()[since:]:
        event = json.loads(line)
        if event["event"] == "acquired":
            in_flight += 1
            peak = max(peak, in_flight)
            waits.append(event["wait_s"])
        elif event["event"] == "released":
            in_flight -= 1
        elif event["event"] == "retry":
            retries += 1
    return peak, waits, retries


def main() -> None:
    overrides: dict[str, object] = {}
    if not os.environ.get("LOG_FILE"):
        overrides["log_file"] = "results/burst-events.jsonl"
    if "MAX_CONCURRENT_LLM_CALLS" not in os.environ:
        overrides["max_concurrent_llm_calls"] = 5
    settings = Settings(**overrides)
    log_path = Path(settings.log_file or "")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.touch()
    lines_before = len(log_path.read_text().splitlines())
    configure_logging(settings)
    anyio.run(burst, settings, log_path, lines_before)


async def burst(settings: Settings, log_path: Path, lines_before: int) -> None:
    opinions: dict[tuple[str, str], str] = {}
    async with Runtime(settings) as runtime, OpenAIChatModel() as model:
        controller = runtime.limiter  # the process's limit, shared by every model using it

        async def judge(agent: str, dimension: str) -> None:
            completion = await model.generate(
                [
                    {"role": "system", "content": f"You are {agent}. Score one dimension 1-5."},
                    {"role": "user", "content": f"Rate this answer for {dimension}: {ANSWER}"},
                ],
                agent=agent,
                dimension=dimension,
            )
            opinions[agent, dimension] = completion.text

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for agent in AGENTS:
                for dimension in DIMENSIONS:
                    tg.start_soon(judge, agent, dimension)
        wall = time.perf_counter() - started
        provider = model.sim.stats() if model.sim is not None else None

    peak, waits, retries = await anyio.to_thread.run_sync(replay, log_path, lines_before)
    print(f"provider        : {model.base_url} (model {model.model})")
    print(f"calls           : {len(opinions)} of {len(AGENTS) * len(DIMENSIONS)} answered")
    print(f"limit           : {controller.limit} (MAX_CONCURRENT_LLM_CALLS)")
    print(f"max in flight   : {controller.statistics().max_active} by the controller, "
          f"{peak} replaying {log_path}")  # fmt: skip
    if provider is not None:
        print(f"provider saw    : {provider['max_in_flight']} at most in flight, "
              f"{provider['requests']} requests")  # fmt: skip
    print(f"queue wait      : p50 {statistics.median(waits):.3f} s, max {max(waits):.3f} s")
    print(f"retries         : {retries}")
    print(f"wall time       : {wall:.2f} s")
    if peak > controller.limit:
        raise SystemExit(f"limit exceeded: {peak} > {controller.limit}")


if __name__ == "__main__":
    main()
