"""OpenAI's Files and Batch APIs on `asynceval sim serve`, driven by the official openai SDK."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Final, cast

import anyio
import httpx
import openai
import pytest
from openai import AsyncOpenAI
from openai.types import Batch

from ..conftest import start_sim_server, stop_sim_server

DELAY = 0.1
CHAT: Final = "/v1/chat/completions"
ENDED = ("completed", "failed", "expired", "cancelled")
SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["yes", "no"]},
        "score": {"type": "integer"},
    },
    "required": ["verdict", "score"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """`asynceval sim serve` whose batches end DELAY seconds after they are created."""
    url, process = start_sim_server("--latency", "0", "--batch-delay", str(DELAY))
    try:
        yield url
    finally:
        stop_sim_server(process)


def chat_body(text: str, **extra: Any) -> dict[str, Any]:
    """A chat completions body, keys in the order the openai SDK sends them."""
    return {"model": "sim", "messages": [{"role": "user", "content": text}], **extra}


def jsonl(bodies: dict[str, dict[str, Any]], url: str = CHAT) -> bytes:
    """A batch input file: one POST to `url` per (custom_id, body)."""
    lines = [
        {"custom_id": custom_id, "method": "POST", "url": url, "body": body}
        for custom_id, body in bodies.items()
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


async def run_batch(
    client: AsyncOpenAI, data: bytes, endpoint: str = CHAT, **extra: Any
) -> tuple[Batch, float]:
    """Upload `data`, create a batch of it, poll until it ends; (the batch, seconds it took)."""
    uploaded = await client.files.create(file=("input.jsonl", data), purpose="batch")
    started = time.monotonic()
    batch = await client.batches.create(
        input_file_id=uploaded.id,
        endpoint=endpoint,  # type: ignore[arg-type]
        completion_window="24h",
        **extra,
    )
    assert batch.status == "validating"
    with anyio.fail_after(10):
        while batch.status not in ENDED:
            await anyio.sleep(0.01)
            batch = await client.batches.retrieve(batch.id)
    return batch, time.monotonic() - started


async def rows(client: AsyncOpenAI, file_id: str | None) -> dict[str, dict[str, Any]]:
    """An output or error file's lines by custom_id (none for no file)."""
    if file_id is None:
        return {}
    content = await client.files.content(file_id)
    lines = [json.loads(line) for line in content.text.splitlines()]
    return {line["custom_id"]: line for line in lines}


def without_created(document: dict[str, Any]) -> dict[str, Any]:
    """An answer without the second it was made at (a batch answers later than live)."""
    return {k: v for k, v in document.items() if k not in ("created", "created_at")}


async def test_each_line_answers_as_the_live_endpoint_for_the_same_body_and_seed(
    base_url: str,
) -> None:
    bodies = {
        "arith": chat_body("What is 12 * 7?"),
        "free": chat_body("Describe the sea in one line"),
        "schema": chat_body(
            "Judge it",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "v", "schema": SCHEMA, "strict": True},
            },
        ),
        "tools": chat_body("Weather in Oslo?", tools=[WEATHER]),
        "choices": chat_body("Name a colour", n=2, max_tokens=5),
    }
    sdk_body = chat_body("Describe the sky in one line")
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        batch, _ = await run_batch(
            client, jsonl({**bodies, "sdk": sdk_body}), metadata={"run": "r1"}
        )
        output = await rows(client, batch.output_file_id)
        live_sdk = await client.chat.completions.create(**sdk_body)
    async with httpx.AsyncClient(base_url=base_url) as raw:
        live = {k: (await raw.post("/chat/completions", json=b)).json() for k, b in bodies.items()}
    live["sdk"] = live_sdk.model_dump(mode="json", exclude_unset=True)
    assert batch.status == "completed"
    assert batch.metadata == {"run": "r1"}
    assert batch.error_file_id is None and batch.errors is None
    assert batch.request_counts is not None
    assert (batch.request_counts.total, batch.request_counts.completed) == (6, 6)
    assert batch.request_counts.failed == 0
    assert set(output) == set(live)
    for custom_id, line in output.items():
        assert line["id"].startswith("batch_req_")
        assert line["error"] is None
        response = line["response"]
        assert response["status_code"] == 200
        assert response["request_id"].startswith("req_")
        assert without_created(response["body"]) == without_created(live[custom_id])
    assert output["arith"]["response"]["body"]["choices"][0]["message"]["content"] == "84"
    assert len(output["choices"]["response"]["body"]["choices"]) == 2
    usage = batch.usage
    assert usage is not None
    assert usage.input_tokens == sum(r["usage"]["prompt_tokens"] for r in live.values())
    assert usage.output_tokens == sum(r["usage"]["completion_tokens"] for r in live.values())


async def test_a_responses_batch_answers_as_the_live_responses_endpoint(base_url: str) -> None:
    bodies = {
        "a": {"model": "sim", "input": "What is 6 * 7?"},
        "b": {"model": "sim", "input": "Say hello", "instructions": "Be brief"},
    }
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        batch, _ = await run_batch(client, jsonl(bodies, "/v1/responses"), "/v1/responses")
        output = await rows(client, batch.output_file_id)
    async with httpx.AsyncClient(base_url=base_url) as raw:
        live = {k: (await raw.post("/responses", json=b)).json() for k, b in bodies.items()}
    assert batch.status == "completed"
    for custom_id, body in live.items():
        assert without_created(output[custom_id]["response"]["body"]) == without_created(body)
    assert output["a"]["response"]["body"]["output"][0]["content"][0]["text"] == "42"


async def test_a_batch_is_validating_then_in_progress_and_completed_after_its_delay(
    base_url: str,
) -> None:
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        uploaded = await client.files.create(
            file=("in.jsonl", jsonl({"q": chat_body("Hi")})), purpose="batch"
        )
        created = await client.batches.create(
            input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h"
        )
        early = await client.batches.retrieve(created.id)
        _, took = await run_batch(client, jsonl({"q": chat_body("Hi")}))
        done = await client.batches.retrieve(created.id)
    assert created.status == "validating"
    assert early.status in ("validating", "in_progress", "finalizing")
    assert early.output_file_id is None
    assert took >= DELAY
    assert done.status == "completed"
    assert done.completed_at is not None and done.in_progress_at is not None
    assert done.expires_at == done.created_at + 24 * 3600
    assert done.output_file_id is not None


async def test_files_are_kept_listed_read_back_and_deleted(base_url: str) -> None:
    data = jsonl({"q": chat_body("Hi")})
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        uploaded = await client.files.create(file=("mine.jsonl", data), purpose="batch")
        again = await client.files.retrieve(uploaded.id)
        content = await client.files.content(uploaded.id)
        listed = [f.id async for f in client.files.list(purpose="batch")]
        deleted = await client.files.delete(uploaded.id)
        with pytest.raises(openai.NotFoundError):
            await client.files.retrieve(uploaded.id)
        with pytest.raises(openai.BadRequestError) as refused:
            await client.files.create(file=("x.jsonl", data), purpose=cast(Any, "nonsense"))
    assert (uploaded.filename, uploaded.purpose, uploaded.bytes) == (
        "mine.jsonl",
        "batch",
        len(data),
    )
    assert again == uploaded
    assert content.content == data
    assert uploaded.id in listed
    assert deleted.deleted and deleted.id == uploaded.id
    assert refused.value.param == "purpose"


async def test_batches_list_newest_first_by_pages_of_limit_after_a_cursor(base_url: str) -> None:
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        uploaded = await client.files.create(
            file=("in.jsonl", jsonl({"q": chat_body("Hi")})), purpose="batch"
        )
        made = [
            (await client.batches.create(
                input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h"
            )).id
            for _ in range(3)
        ]  # fmt: skip
        first = await client.batches.list(limit=2)
        every = [batch.id async for batch in client.batches.list(limit=2)]
    assert [b.id for b in first.data] == made[::-1][:2]
    assert first.has_more
    assert every[:3] == made[::-1]
    assert len(every) == len(set(every))


async def test_cancel_before_the_end_cancels_every_line_and_a_completed_batch_refuses(
    base_url: str,
) -> None:
    bodies = {"a": chat_body("One"), "b": chat_body("Two")}
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        uploaded = await client.files.create(file=("in.jsonl", jsonl(bodies)), purpose="batch")
        batch = await client.batches.create(
            input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h"
        )
        cancelling = await client.batches.cancel(batch.id)
        cancelled = await client.batches.retrieve(batch.id)
        errors = await rows(client, cancelled.error_file_id)
        completed, _ = await run_batch(client, jsonl(bodies))
        with pytest.raises(openai.ConflictError):
            await client.batches.cancel(completed.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None
    assert cancelled.output_file_id is None
    assert set(errors) == {"a", "b"}
    for line in errors.values():
        assert line["response"] is None
        assert line["error"]["code"] == "batch_cancelled"


async def test_input_lines_the_api_refuses_fail_the_batch_naming_each_line(
    base_url: str,
) -> None:
    good = {"custom_id": "a", "method": "POST", "url": CHAT, "body": chat_body("Hi")}
    lines = [
        good,
        good,  # custom_id used twice
        {**good, "custom_id": "b", "method": "GET"},
        {**good, "custom_id": "c", "url": "/v1/responses"},
        {**good, "custom_id": "d", "body": {**chat_body("Hi"), "model": "other"}},
        {"custom_id": "e", "method": "POST", "url": CHAT},
    ]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines) + b"{not json\n"
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        batch, _ = await run_batch(client, data)
    assert batch.status == "failed" and batch.failed_at is not None
    assert batch.output_file_id is None and batch.error_file_id is None
    assert batch.errors is not None and batch.errors.data is not None
    found = [(e.code, e.line, e.param) for e in batch.errors.data]
    assert found == [
        ("duplicate_custom_id", 2, "custom_id"),
        ("invalid_method", 3, "method"),
        ("invalid_url", 4, "url"),
        ("mismatched_model", 5, "body.model"),
        ("missing_required_parameter", 6, "body"),
        ("invalid_json_line", 7, None),
    ]


async def test_create_refuses_a_bad_window_endpoint_or_file_as_openai_does(
    base_url: str,
) -> None:
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        uploaded = await client.files.create(
            file=("in.jsonl", jsonl({"q": chat_body("Hi")})), purpose="batch"
        )
        not_batch = await client.files.create(
            file=("in.jsonl", jsonl({"q": chat_body("Hi")})), purpose="user_data"
        )
        refusals: list[openai.APIStatusError] = []
        for input_file_id, endpoint, window in (
            (uploaded.id, CHAT, "1h"),
            (uploaded.id, "/v1/embeddings", "24h"),
            ("file-missing", CHAT, "24h"),
            (not_batch.id, CHAT, "24h"),
        ):
            with pytest.raises(openai.APIStatusError) as refused:
                await client.batches.create(
                    input_file_id=input_file_id,
                    endpoint=cast(Any, endpoint),
                    completion_window=cast(Any, window),
                )
            refusals.append(refused.value)
    assert [(r.status_code, cast(Any, r).param) for r in refusals] == [
        (400, "completion_window"),
        (400, "endpoint"),
        (404, "input_file_id"),
        (400, "input_file_id"),
    ]


async def test_a_line_the_live_route_refuses_is_its_400_in_the_error_file(base_url: str) -> None:
    bodies = {"ok": chat_body("Hi"), "bad": chat_body("Hi", logprobs=True)}
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        batch, _ = await run_batch(client, jsonl(bodies))
        errors = await rows(client, batch.error_file_id)
    async with httpx.AsyncClient(base_url=base_url) as raw:
        live = await raw.post("/chat/completions", json=bodies["bad"])
    assert batch.status == "completed"
    assert batch.request_counts is not None
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)
    response = errors["bad"]["response"]
    assert (response["status_code"], response["body"]) == (live.status_code, live.json())
    assert errors["bad"]["error"] is None
