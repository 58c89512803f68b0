"""The batch lane over HTTP against `asynceval sim serve` (its batch APIs with a processing delay
and faults), through the funnel's own HTTP client: a run's calls go in a few batches with the live
run's answers, lines that errored or expired are sent again, `logs check` on the run directory
counts the batch lines as calls that held no slot and adds the batches' cost to the run's spend;
the OpenAI SDK's calls on the funnel go in batches too."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from asynceval import OpenAIChatModel, Settings
from asynceval.cli import main

from .test_batch_lane import Turns, lane_settings, run


async def stats(base_url: str, reset: bool = False) -> dict[str, Any]:
    """The simulated provider's `GET /stats` (after `POST /stats/reset` with `reset`)."""
    origin = base_url.removesuffix("/v1")
    async with httpx.AsyncClient() as client:
        if reset:
            await client.post(origin + "/stats/reset")
        document: dict[str, Any] = (await client.get(origin + "/stats")).json()
    return document


async def test_a_batch_run_over_http_answers_as_live_and_logs_check_counts_it(
    sim_server: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url = sim_server(
        "--batch-delay", "0.2", "--batch-error-rate", "0.15", "--batch-expire-rate", "0.1"
    )

    def model() -> OpenAIChatModel:
        return OpenAIChatModel("asynceval-sim", base_url=base_url, api_key="sk-serve")

    started = time.monotonic()
    live, live_reports = await run(Turns(model()), lane_settings("live"), 24)
    live_s = time.monotonic() - started
    await stats(base_url, reset=True)
    out = tmp_path / "run"
    settings = lane_settings(retry_max_attempts=8, llm_batch_poll=0.05)
    started = time.monotonic()
    answers, reports = await run(Turns(model()), settings, 24, results_path=out / "results.jsonl")
    batch_s = time.monotonic() - started
    assert answers == live
    served = await stats(base_url)
    counts = served["batches"]["openai"]
    assert served["requests"] == 0
    assert (
        counts["succeeded"] == 24 and counts["lines"] == 24 + counts["errored"] + counts["expired"]
    )
    assert counts["created"] < 24
    cost = sum(r["usage"]["cost_usd"] for r in reports)
    assert cost == pytest.approx(sum(r["usage"]["cost_usd"] for r in live_reports) / 2)

    capsys.readouterr()
    assert main(["logs", "check", str(out), "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert check["batch_calls"] == 24 and check["batches"] == counts["created"]
    assert check["answered_without_slot"] == 24
    assert check["cost_usd"] == pytest.approx(cost)
    assert check["ok"] and check["max_in_flight"] == 1  # the creations' slots, one at a time
    print(
        f"\nlive: 24 calls in {live_s:.2f} s; batch: {counts['created']} batches, "
        f"{counts['lines']} lines, {batch_s:.2f} s; cost {cost:.3g} vs "
        f"{sum(r['usage']['cost_usd'] for r in live_reports):.3g} USD"
    )


async def test_the_openai_sdk_on_the_funnel_sends_batches_over_http(
    sim_server: Callable[..., str],
) -> None:
    pytest.importorskip("openai")
    from asynceval import Runtime
    from asynceval.interop import openai_client

    base_url = sim_server("--batch-delay", "0.1")
    settings: Settings = lane_settings(llm_base_url=base_url)
    async with Runtime(settings):
        client = openai_client()
        texts: dict[int, str] = {}

        async def ask(i: int) -> None:
            completion = await client.chat.completions.create(
                model="asynceval-sim", messages=[{"role": "user", "content": f"What is {i} + 7?"}]
            )
            texts[i] = completion.choices[0].message.content
            assert completion.usage.prompt_tokens > 0

        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(ask, i)
    assert texts == {i: str(i + 7) for i in range(12)}
    counts = (await stats(base_url))["batches"]["openai"]
    assert counts["lines"] == counts["succeeded"] == 12 and counts["created"] == 1
