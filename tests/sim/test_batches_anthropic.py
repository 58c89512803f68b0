"""Anthropic's Message Batches API on `asynceval sim serve`, driven by the official anthropic SDK."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

import anthropic
import anyio
import httpx
import pytest
from anthropic import AsyncAnthropic
from anthropic.types.messages import MessageBatch

from ..conftest import start_sim_server, stop_sim_server

DELAY = 0.1
TOOL = {
    "name": "get_weather",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    """`asynceval sim serve` whose batches end DELAY seconds after they are created; its root
    URL (the anthropic SDK's base URL)."""
    url, process = start_sim_server("--latency", "0", "--batch-delay", str(DELAY))
    try:
        yield url.removesuffix("/v1")
    finally:
        stop_sim_server(process)


def params(text: str, **extra: Any) -> dict[str, Any]:
    """Messages API parameters, keys in the order the anthropic SDK sends them."""
    return {
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "model": "sim",
        **extra,
    }


def client(root: str) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=root, api_key="x", max_retries=0)


async def until_ended(sdk: AsyncAnthropic, batch: MessageBatch) -> tuple[MessageBatch, float]:
    """Poll until the batch has ended; (the batch, seconds from the first poll)."""
    started = time.monotonic()
    with anyio.fail_after(10):
        while batch.processing_status != "ended":
            await anyio.sleep(0.01)
            batch = await sdk.messages.batches.retrieve(batch.id)
    return batch, time.monotonic() - started


async def results(sdk: AsyncAnthropic, batch_id: str) -> dict[str, Any]:
    """The batch's results by custom_id."""
    decoder = await sdk.messages.batches.results(batch_id)
    return {line.custom_id: line.result async for line in decoder}


async def test_each_result_is_the_live_messages_answer_for_the_same_params_and_seed(
    root: str,
) -> None:
    asked = {
        "arith": params("What is 9 * 9?"),
        "free": params("Describe a forest"),
        "tool": params("Weather in Lima?", tools=[TOOL]),
    }
    sdk_params = params("Describe a river")
    async with client(root) as sdk:
        requests = [{"custom_id": k, "params": p} for k, p in {**asked, "sdk": sdk_params}.items()]
        batch = await sdk.messages.batches.create(requests=cast(Any, requests))
        ended, _ = await until_ended(sdk, batch)
        found = await results(sdk, batch.id)
        live_sdk = await sdk.messages.create(**sdk_params)
    async with httpx.AsyncClient(base_url=root) as raw:
        live = {k: (await raw.post("/v1/messages", json=p)).json() for k, p in asked.items()}
    live["sdk"] = live_sdk.model_dump(mode="json", exclude_unset=True)
    assert batch.processing_status == "in_progress"
    assert batch.request_counts.processing == 4 and batch.results_url is None
    assert ended.processing_status == "ended" and ended.ended_at is not None
    assert ended.request_counts.succeeded == 4 and ended.request_counts.processing == 0
    assert ended.results_url == f"{root}/v1/messages/batches/{batch.id}/results"
    assert set(found) == set(live)
    for custom_id, result in found.items():
        assert result.type == "succeeded"
        assert result.message.model_dump(mode="json", exclude_unset=True) == live[custom_id]
    assert found["arith"].message.content[0].text == "81"
    assert found["tool"].message.stop_reason == "tool_use"


async def test_a_batch_is_in_progress_until_its_delay_has_passed(root: str) -> None:
    async with client(root) as sdk:
        started = time.monotonic()
        batch = await sdk.messages.batches.create(
            requests=[{"custom_id": "q", "params": cast(Any, params("Hi"))}]
        )
        early = await sdk.messages.batches.retrieve(batch.id)
        ended, _ = await until_ended(sdk, early)
        took = time.monotonic() - started
    assert early.processing_status == "in_progress"
    assert took >= DELAY
    assert ended.ended_at is not None
    assert (ended.ended_at - ended.created_at).total_seconds() == pytest.approx(DELAY, abs=1e-3)
    assert (ended.expires_at - ended.created_at).total_seconds() == 24 * 3600


async def test_cancel_before_the_end_cancels_every_request(root: str) -> None:
    requests = [{"custom_id": f"r{i}", "params": params(f"Question {i}")} for i in range(3)]
    async with client(root) as sdk:
        batch = await sdk.messages.batches.create(requests=cast(Any, requests))
        canceling = await sdk.messages.batches.cancel(batch.id)
        ended = await sdk.messages.batches.retrieve(batch.id)
        found = await results(sdk, batch.id)
        again = await sdk.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None
    assert ended.processing_status == "ended"
    assert ended.request_counts.canceled == 3
    assert {result.type for result in found.values()} == {"canceled"}
    assert again.processing_status == "ended"


async def test_an_ended_batch_cannot_be_canceled_and_a_running_one_cannot_be_deleted(
    root: str,
) -> None:
    async with client(root) as sdk:
        batch = await sdk.messages.batches.create(
            requests=[{"custom_id": "q", "params": cast(Any, params("Hi"))}]
        )
        with pytest.raises(anthropic.BadRequestError):
            await sdk.messages.batches.delete(batch.id)
        await until_ended(sdk, batch)
        with pytest.raises(anthropic.BadRequestError):
            await sdk.messages.batches.cancel(batch.id)
        deleted = await sdk.messages.batches.delete(batch.id)
        with pytest.raises(anthropic.NotFoundError):
            await sdk.messages.batches.retrieve(batch.id)
    assert deleted.id == batch.id and deleted.type == "message_batch_deleted"


async def test_create_refuses_duplicate_or_malformed_custom_ids(root: str) -> None:
    bad_requests = [
        [{"custom_id": "a", "params": params("x")}, {"custom_id": "a", "params": params("y")}],
        [{"custom_id": "has space", "params": params("x")}],
        [{"custom_id": "x" * 65, "params": params("x")}],
        [{"custom_id": "a"}],
        [],
    ]
    async with client(root) as sdk:
        for requests in bad_requests:
            with pytest.raises(anthropic.BadRequestError) as refused:
                await sdk.messages.batches.create(requests=cast(Any, requests))
            assert refused.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


async def test_params_the_live_route_refuses_are_errored_results(root: str) -> None:
    requests = [
        {"custom_id": "ok", "params": params("Hi")},
        {"custom_id": "no_messages", "params": {"max_tokens": 10, "model": "sim"}},
        {"custom_id": "streamed", "params": params("Hi", stream=True)},
    ]
    async with client(root) as sdk:
        batch = await sdk.messages.batches.create(requests=cast(Any, requests))
        ended, _ = await until_ended(sdk, batch)
        found = await results(sdk, batch.id)
    assert (ended.request_counts.succeeded, ended.request_counts.errored) == (1, 2)
    for custom_id in ("no_messages", "streamed"):
        result = found[custom_id]
        assert result.type == "errored"
        assert result.error.error.type == "invalid_request_error"


async def test_batches_list_newest_first_by_pages(root: str) -> None:
    async with client(root) as sdk:
        made = [
            (await sdk.messages.batches.create(
                requests=[{"custom_id": "q", "params": cast(Any, params("Hi"))}]
            )).id
            for _ in range(3)
        ]  # fmt: skip
        first = await sdk.messages.batches.list(limit=2)
        every = [batch.id async for batch in sdk.messages.batches.list(limit=2)]
    assert [b.id for b in first.data] == made[::-1][:2]
    assert first.has_more
    assert every[:3] == made[::-1]
    assert len(every) == len(set(every))
