"""What callers of one provider share through the funnel, and what they must not: one endpoint
per API base URL (its 429 pause and adaptive limit), one pool per origin and limiter, no cookies
across callers, and a transport object that stays its owner's."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from httpx_aiohttp import AiohttpTransport

from asynceval import OpenAIChatModel, Runtime, Settings, http_client
from asynceval.funnel import endpoint_of
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig, SimProvider

from ..llm.test_direct_send import ANSWER

LoopBack = Callable[[SimConfig], tuple[str, SimProvider]]


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1"),
        ("https://api.openai.com/v1/responses/resp_1", "https://api.openai.com/v1"),
        ("https://api.openai.com/v1/models", "https://api.openai.com/v1"),
        ("https://API.OpenAI.com:443/v1/chat/completions", "https://api.openai.com/v1"),
        ("http://localhost:80/v1/messages", "http://localhost/v1"),
        (
            "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=1",
            "https://x.openai.azure.com/openai/deployments/gpt-4o",
        ),
        ("http://gpu:8000/llama/v1/chat/completions", "http://gpu:8000/llama/v1"),
        ("http://gpu:8000/qwen/v1/chat/completions", "http://gpu:8000/qwen/v1"),
        ("http://host/health", "http://host"),
        ("http://host", "http://host"),
    ],
)
def test_an_endpoint_is_the_api_base_url_of_a_request(url: str, endpoint: str) -> None:
    """A model's base URL and an SDK's requests under it name one endpoint, whatever the
    spelling of the host and port; two deployments or servers on one host are two."""
    assert endpoint_of(httpx.URL(url)) == endpoint


class _CookieServer:
    """A provider on localhost that answers every chat completion with a cookie for the key
    that asked, and notes the cookies each request brought."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []  # (authorization, cookie header)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        auth = headers.get("authorization", "")
        self.seen.append((auth, headers.get("cookie")))
        body = json.dumps(ANSWER).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"set-cookie", f"session=of-{auth.split()[-1]}; Path=/".encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def cookie_server(asgi_server: Callable[[Any], int]) -> tuple[str, _CookieServer]:
    app = _CookieServer()
    # localhost, not 127.0.0.1: aiohttp keeps no cookies for hosts that are IP addresses
    return f"http://localhost:{asgi_server(app)}/v1", app


async def test_no_caller_gets_another_callers_cookies(
    cookie_server: tuple[str, _CookieServer],
) -> None:
    """One pool serves every caller of a provider (any API key): its transport keeps no cookie
    a provider set for one key, so none reaches another key's request (nor the same key's)."""
    url, app = cookie_server
    async with Runtime(Settings()):
        first = OpenAIChatModel("m", base_url=url, api_key="key-a")
        second = OpenAIChatModel("m", base_url=url, api_key="key-b")
        await first.generate("hi")
        await second.generate("hi")
        await first.generate("hi again")
        async with http_client() as client:
            sdk = await client.post(
                f"{url}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": "Bearer key-c"},
            )
        await first.aclose()
    assert sdk.status_code == 200
    assert [auth for auth, _ in app.seen] == [
        "Bearer key-a", "Bearer key-b", "Bearer key-a", "Bearer key-c",
    ]  # fmt: skip
    assert [cookie for _, cookie in app.seen] == [None, None, None, None]


async def test_a_transport_object_given_to_a_model_stays_open_after_aclose(
    loopback: LoopBack,
) -> None:
    """The caller made it, the caller closes it: the model's `aclose()` (and a run's end)
    closes the pool around it, not the transport, so the model keeps working."""
    url, sim = loopback(SimConfig(latency=0))
    transport = AiohttpTransport()
    try:
        async with Runtime(Settings()):
            model = OpenAIChatModel("sim", base_url=url, transport=transport)
            async with model:
                first = await model.generate("What is 2 + 2?")
            second = await model.generate("What is 3 + 3?")  # after aclose()
            await model.aclose()
    finally:
        await transport.aclose()
    assert (first.text, second.text) == ("4", "6")
    assert sim.stats()["requests"] == 2


async def test_callers_under_two_limiters_do_not_queue_for_each_others_connections(
    loopback: LoopBack,
) -> None:
    """A model with a limiter of its own and SDK calls under the runtime's (both 5) keep their
    own pools: 10 calls go out at once, as the provider's own count shows, where one shared
    pool of 5 connections would hold half of them back while they held their slots."""
    url, sim = loopback(SimConfig(latency=0.5))
    async with Runtime(Settings(max_concurrent_llm_calls=5)):
        model = OpenAIChatModel("sim", base_url=url, controller=ConcurrencyController(5))
        async with http_client() as client, anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(model.generate, f"What is {n} + 1?")
                tg.start_soon(
                    lambda n=n: client.post(
                        f"{url}/chat/completions",
                        json={
                            "model": "sim",
                            "messages": [{"role": "user", "content": f"What is {n} + 2?"}],
                        },
                    )
                )
        await model.aclose()
    assert sim.stats()["max_in_flight"] == 10


async def test_a_transport_keeps_a_bounded_number_of_routes() -> None:
    """An agent's HTTP tool on `http_client()` may fetch from many sites: the transport keeps
    at most MAX_ROUTES of them (the oldest goes), and each request still gets its answer."""
    from asynceval.interop import FunnelTransport
    from asynceval.interop._transport import MAX_ROUTES

    inner = httpx.MockTransport(lambda request: httpx.Response(200, json=ANSWER))
    transport = FunnelTransport(inner)
    async with Runtime(Settings()), httpx.AsyncClient(transport=transport) as client:
        answers = [await client.get(f"http://site-{n}.test/page") for n in range(MAX_ROUTES + 6)]
    assert [a.status_code for a in answers] == [200] * (MAX_ROUTES + 6)
    assert len(transport._routes) == MAX_ROUTES
    assert "http://site-0.test" not in transport._routes  # the oldest went first
