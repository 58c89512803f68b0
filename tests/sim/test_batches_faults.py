"""Batch faults (failed batches, errored and expired lines), their draws per seed, and the batch
counters of `/stats`, on `asynceval sim serve` with the official SDKs and in process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, Final, cast

import anyio
import httpx
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from openai.types import Batch

from asynceval.sim import SimConfig, SimProvider

from ..conftest import start_sim_server, stop_sim_server

CHAT: Final = "/v1/chat/completions"
FAULTS = ("--batch-error-rate", "0.3", "--batch-expire-rate", "0.2", "--seed", "5")


@pytest.fixture(scope="module")
def faulty() -> Iterator[str]:
    """`asynceval sim serve` whose batch lines error (30%) or expire (20%)."""
    url, process = start_sim_server("--latency", "0", "--batch-delay", "0.05", *FAULTS)
    try:
        yield url
    finally:
        stop_sim_server(process)


def body(i: int) -> dict[str, Any]:
    return {"model": "sim", "messages": [{"role": "user", "content": f"What is {i} + {i}?"}]}


def jsonl(ids: list[int]) -> bytes:
    lines = [{"custom_id": f"q{i}", "method": "POST", "url": CHAT, "body": body(i)} for i in ids]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


async def openai_batch(client: AsyncOpenAI, ids: list[int]) -> Batch:
    """Upload and run a chat batch of the questions `ids` until it ends."""
    uploaded = await client.files.create(file=("in.jsonl", jsonl(ids)), purpose="batch")
    batch = await client.batches.create(
        input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h"
    )
    with anyio.fail_after(10):
        while batch.status not in ("completed", "failed", "expired", "cancelled"):
            await anyio.sleep(0.01)
            batch = await client.batches.retrieve(batch.id)
    return batch


async def rows(client: AsyncOpenAI, file_id: str | None) -> dict[str, dict[str, Any]]:
    if file_id is None:
        return {}
    content = await client.files.content(file_id)
    return {row["custom_id"]: row for row in map(json.loads, content.text.splitlines())}


def stats(base_url: str) -> dict[str, Any]:
    return cast(dict[str, Any], httpx.get(base_url.removesuffix("/v1") + "/stats").json())


async def test_errored_and_expired_lines_are_shaped_as_openai_and_retried_lines_draw_again(
    faulty: str,
) -> None:
    before = stats(faulty).get("batches", {}).get("openai", {"lines": 0, "created": 0})
    async with AsyncOpenAI(base_url=faulty, api_key="x", max_retries=0) as client:
        first = await openai_batch(client, list(range(40)))
        output = await rows(client, first.output_file_id)
        errors = await rows(client, first.error_file_id)
        again = [int(custom_id[1:]) for custom_id in errors]
        second = await openai_batch(client, again)
        retried = await rows(client, second.output_file_id)
    errored = {k for k, row in errors.items() if row["response"] is not None}
    expired = {k for k, row in errors.items() if row["response"] is None}
    assert errored and expired
    assert first.status == "expired" and first.expired_at is not None
    assert first.request_counts is not None
    assert first.request_counts.completed == len(output) == 40 - len(errors)
    assert first.request_counts.failed == len(errors)
    for custom_id in errored:
        response = errors[custom_id]["response"]
        assert response["status_code"] == 500
        assert response["body"]["error"]["type"] == "server_error"
        assert errors[custom_id]["error"] is None
    for custom_id in expired:
        assert errors[custom_id]["error"]["code"] == "batch_expired"
    assert retried, "a retried line draws again: some succeed the second time"
    for row in retried.values():
        assert row["response"]["body"]["id"].endswith("0001")  # its second batch attempt
    after = stats(faulty)["batches"]["openai"]
    assert after["created"] - before["created"] == 2
    assert after["lines"] - before["lines"] == 40 + len(errors)


async def test_errored_and_expired_requests_are_shaped_as_anthropic(faulty: str) -> None:
    before = stats(faulty).get("batches", {}).get("anthropic", {"lines": 0})
    requests = [
        {
            "custom_id": f"q{i}",
            "params": {"max_tokens": 16, "messages": body(i)["messages"], "model": "sim"},
        }
        for i in range(40)
    ]
    async with AsyncAnthropic(
        base_url=faulty.removesuffix("/v1"), api_key="x", max_retries=0
    ) as sdk:
        batch = await sdk.messages.batches.create(requests=cast(Any, requests))
        with anyio.fail_after(10):
            while batch.processing_status != "ended":
                await anyio.sleep(0.01)
                batch = await sdk.messages.batches.retrieve(batch.id)
        found = {r.custom_id: r.result async for r in await sdk.messages.batches.results(batch.id)}
    kinds = [result.type for result in found.values()]
    counts = batch.request_counts
    assert (counts.succeeded, counts.errored, counts.expired) == (
        kinds.count("succeeded"),
        kinds.count("errored"),
        kinds.count("expired"),
    )
    assert counts.errored and counts.expired and counts.succeeded
    for result in found.values():
        if result.type == "errored":
            assert result.error.error.type == "api_error"
    after = stats(faulty)["batches"]["anthropic"]
    assert after["lines"] - before["lines"] == 40


def test_the_first_n_batches_fail_whichever_api_then_batches_run(
    sim_server: Callable[..., str],
) -> None:
    base_url = sim_server("--latency", "0", "--batch-fail-first", "2")

    async def main() -> tuple[Batch, Any, Batch]:
        async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
            failed = await openai_batch(client, [1, 2])
            async with AsyncAnthropic(
                base_url=base_url.removesuffix("/v1"), api_key="x", max_retries=0
            ) as sdk:
                request = {"custom_id": "a", "params": {"max_tokens": 8, **body(1), "model": "x"}}
                made = await sdk.messages.batches.create(requests=[cast(Any, request)])
                ended = await sdk.messages.batches.retrieve(made.id)
                results = [r.result async for r in await sdk.messages.batches.results(made.id)]
            ran = await openai_batch(client, [1, 2])
        assert [r.type for r in results] == ["errored"]
        return failed, ended, ran

    failed, ended, ran = anyio.run(main)
    assert failed.status == "failed" and failed.failed_at is not None
    assert failed.errors is not None and failed.errors.data is not None
    assert [e.code for e in failed.errors.data] == ["batch_failed"]
    assert failed.output_file_id is None and failed.error_file_id is None
    assert ended.processing_status == "ended" and ended.request_counts.errored == 1
    assert ran.status == "completed"
    counters = stats(base_url)["batches"]
    assert (counters["openai"]["failed"], counters["anthropic"]["failed"]) == (1, 1)
    assert (counters["openai"]["created"], counters["openai"]["lines"]) == (2, 4)


async def outcomes(app: SimProvider, ids: list[int]) -> dict[str, str]:
    """In process: each line's outcome ("200", "500" or an error code) in a chat batch."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        uploaded = await c.post(
            "/v1/files", files={"file": ("in.jsonl", jsonl(ids))}, data={"purpose": "batch"}
        )
        made = await c.post(
            "/v1/batches",
            json={
                "input_file_id": uploaded.json()["id"],
                "endpoint": CHAT,
                "completion_window": "24h",
            },
        )
        batch = (await c.get(f"/v1/batches/{made.json()['id']}")).json()
        found: dict[str, str] = {}
        for key in ("output_file_id", "error_file_id"):
            if batch[key] is not None:
                content = (await c.get(f"/v1/files/{batch[key]}/content")).text
                for row in map(json.loads, content.splitlines()):
                    response, error = row["response"], row["error"]
                    status = str(response["status_code"]) if response else error["code"]
                    found[row["custom_id"]] = status
        if batch["status"] == "failed":
            found = {"batch": "failed"}
    return found


def provider(seed: int, **config: Any) -> SimProvider:
    return SimProvider(SimConfig(seed=seed, latency=0.0, **config))


async def test_line_faults_are_drawn_per_seed_not_per_arrival() -> None:
    config = {"batch_error_rate": 0.3, "batch_expire_rate": 0.2}
    ids = list(range(30))
    one = await outcomes(provider(3, **config), ids)
    same = await outcomes(provider(3, **config), ids[::-1])
    other = await outcomes(provider(4, **config), ids)
    assert one == same
    assert one != other
    assert set(one.values()) == {"200", "500", "batch_expired"}


async def test_batch_failures_are_drawn_per_seed_and_a_rate_of_one_fails_every_batch() -> None:
    one = [await outcomes(provider(1, batch_fail_rate=0.5), [i]) for i in range(12)]
    same = [await outcomes(provider(1, batch_fail_rate=0.5), [i]) for i in range(12)]
    fails = [found == {"batch": "failed"} for found in one]
    assert one == same
    assert any(fails) and not all(fails)
    always = provider(0, batch_fail_rate=1.0)
    assert [await outcomes(always, [i]) for i in range(3)] == [{"batch": "failed"}] * 3


async def test_stats_count_batches_and_lines_per_provider_and_a_reset_zeroes_them() -> None:
    app = provider(0)
    zero = app.stats()["batches"]
    assert zero["openai"]["created"] == zero["anthropic"]["lines"] == 0
    await outcomes(app, [1, 2, 3])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        made = await c.post(
            "/v1/messages/batches",
            json={"requests": [{"custom_id": "a", "params": {"max_tokens": 8, **body(1)}}]},
        )
        await c.get(f"/v1/messages/batches/{made.json()['id']}")
        served = (await c.get("/stats")).json()
        assert served == app.stats()
        app.reset_stats()
        after_reset = (await c.get("/stats")).json()
    openai_counts = served["batches"]["openai"]
    assert (openai_counts["created"], openai_counts["lines"], openai_counts["succeeded"]) == (
        1,
        3,
        3,
    )
    assert openai_counts["tokens"]["prompt"] > 0 and openai_counts["tokens"]["completion"] > 0
    anthropic_counts = served["batches"]["anthropic"]
    assert (anthropic_counts["created"], anthropic_counts["lines"]) == (1, 1)
    assert anthropic_counts["succeeded"] == 1
    assert served["requests"] == 0 and served["tokens"] == {"prompt": 0, "completion": 0}
    assert after_reset["batches"] == zero


def test_bad_batch_settings_are_refused() -> None:
    for bad in (
        {"batch_delay": -1.0},
        {"batch_fail_first": -1},
        {"batch_fail_rate": 1.5},
        {"batch_error_rate": 0.6, "batch_expire_rate": 0.6},
    ):
        with pytest.raises(ValueError, match="batch"):
            SimConfig(**bad)
    done = subprocess.run(
        [sys.executable, "-m", "asynceval.cli", "sim", "serve", "--batch-delay", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "batch_delay" in done.stderr
