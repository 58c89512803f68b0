"""The model-call cache is honest: an answer is served only to whoever it was given to (API key,
organisation, project, custom default headers; never per-request SDK headers), and a damaged
entry is never handed to an SDK client: it is a miss, asked again and replaced."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asynceval import Runtime, Settings
from asynceval.interop import openai_client


class EchoProvider:
    """A chat completions endpoint that answers with who asked, counting the requests."""

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        self.requests += 1
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        key = hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()[:8]
        who = f"key {key} " + " ".join(  # never the key itself: the answer is stored
            f"{name}={headers.get(name, '-')}"
            for name in ("openai-organization", "openai-project", "x-tenant")
        )
        body = json.dumps(
            {
                "id": f"c{self.requests}",
                "object": "chat.completion",
                "created": 0,
                "model": "echo",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": who},
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


MESSAGE = [{"role": "user", "content": "Who am I?"}]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"organization": "org-a"}, {"organization": "org-b"}),
        ({"project": "proj-a"}, {"project": "proj-b"}),
        ({"api_key": "sk-a"}, {"api_key": "sk-b"}),
        ({"default_headers": {"x-tenant": "a"}}, {"default_headers": {"x-tenant": "b"}}),
    ],
)
async def test_one_caller_is_never_served_anothers_answer(
    asgi_server: Callable[[Any], int], tmp_path: Path, a: dict[str, Any], b: dict[str, Any]
) -> None:
    provider = EchoProvider()
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):

        async def ask(options: dict[str, Any]) -> str:
            options = {"api_key": "sk-a", **options}
            client = openai_client(base_url=base_url, **options)
            done = await client.chat.completions.create(model="echo", messages=MESSAGE)
            await client.close()
            return done.choices[0].message.content or ""

        first_a = await ask(a)
        first_b = await ask(b)
        assert provider.requests == 2 and first_a != first_b  # B asked, not served A's
        assert await ask(a) == first_a and await ask(b) == first_b
        assert provider.requests == 2  # each one's own answer, from the cache
    stored = b"".join(p.read_bytes() for p in (tmp_path / "cache").iterdir())
    assert b"sk-a" not in stored and b"sk-b" not in stored  # keys hashed, never kept


async def test_sdk_retry_headers_do_not_split_the_cache(
    asgi_server: Callable[[Any], int], tmp_path: Path
) -> None:
    """The SDK's per-request headers (x-stainless-retry-count, read timeout, idempotency key)
    change nothing of the answer: not part of the key."""
    provider = EchoProvider()
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        client = openai_client(base_url=base_url, api_key="sk-a")
        await client.chat.completions.create(
            model="echo", messages=MESSAGE, extra_headers={"x-stainless-retry-count": "0"}
        )
        await client.chat.completions.create(
            model="echo",
            messages=MESSAGE,
            timeout=33.0,
            extra_headers={"x-stainless-retry-count": "2", "idempotency-key": "other"},
        )
        await client.close()
    assert provider.requests == 1


async def test_a_cut_entry_is_asked_again_never_handed_to_the_sdk(
    asgi_server: Callable[[Any], int], tmp_path: Path
) -> None:
    provider = EchoProvider()
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    cache = tmp_path / "cache"
    async with Runtime(Settings(llm_cache_dir=str(cache))):
        client = openai_client(base_url=base_url, api_key="sk-a")

        async def ask() -> str:
            done = await client.chat.completions.create(model="echo", messages=MESSAGE)
            return done.choices[0].message.content or ""

        first = await ask()
        with sqlite3.connect(cache / "cache.sqlite") as db:  # a torn write: the body cut short
            db.execute("UPDATE entries SET body = substr(body, 1, 40)")
        assert await ask() == first and provider.requests == 2  # a miss: asked again
        assert await ask() == first and provider.requests == 2  # and the entry replaced
        with sqlite3.connect(cache / "cache.sqlite") as db:  # cut with a matching digest
            db.execute("UPDATE entries SET body = substr(body, 1, 40), length = 40")
        assert await ask() == first and provider.requests == 3
        await client.close()
