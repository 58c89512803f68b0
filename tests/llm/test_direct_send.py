"""Our models send straight to the pool's transport (no client layer), unless a proxy from the
environment means the client must route the request."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from asynceval import LLMCallFailed, OpenAIChatModel, Runtime, Settings
from asynceval.funnel._clients import create_client, transport_of

ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def no_proxy_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


async def test_a_request_goes_to_the_transport_as_built(monkeypatch: pytest.MonkeyPatch) -> None:
    no_proxy_in_environment(monkeypatch)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    model = OpenAIChatModel(
        "m", base_url="http://provider.test/v1", api_key="sk-direct-0123456789",
        transport=httpx.MockTransport(handler),
    )  # fmt: skip
    completion = await model.generate("What is 2 + 2?", temperature=0)
    assert completion.text == "4" and completion.usage.total_tokens == 4
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "http://provider.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-direct-0123456789"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("asynceval/")
    assert request.headers["host"] == "provider.test"
    # Sent straight to the transport, not through the client (which adds a timeout extension
    # and its default accept-encoding and connection headers).
    assert request.extensions == {}  # no client layer between
    assert request.headers["accept-encoding"] == "gzip, deflate"  # asked for by the model itself
    body = json.loads(request.content)
    assert body["messages"] == [{"role": "user", "content": "What is 2 + 2?"}]
    assert body["temperature"] == 0 and body["model"] == "m"


async def test_an_error_answer_is_mapped_on_the_direct_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_proxy_in_environment(monkeypatch)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"message": "no such model"}})

    model = OpenAIChatModel(
        "m", base_url="http://provider.test/v1", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(LLMCallFailed, match="no such model") as raised:
        await model.generate("hi")
    assert raised.value.status_code == 400 and not raised.value.retryable
    assert len(seen) == 1 and seen[0].extensions == {}  # refused once, on the direct path


def test_the_transport_is_used_directly_only_without_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_proxy_in_environment(monkeypatch)
    plain = create_client(base_url="http://provider.test/v1/", limit=2, transport="httpx")
    assert isinstance(transport_of(plain), httpx.AsyncHTTPTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    proxied = create_client(base_url="https://provider.test/v1/", limit=2, transport="httpx")
    assert transport_of(proxied) is None  # the client's proxy mounts must see the request
    # ... and the client does route it through the proxy from the environment.
    route = proxied._transport_for_url(httpx.URL("https://provider.test/v1/chat/completions"))
    assert isinstance(route, httpx.AsyncHTTPTransport) and route is not proxied._transport
    assert transport_of(httpx.AsyncClient()) is None  # not one of ours


async def test_a_proxy_from_the_environment_carries_the_models_calls(
    sim_server: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With stock httpx and HTTP_PROXY set, the call goes through the client's routing to the
    proxy (the simulator, which answers by path: a 404 naming the URL it was asked for)."""
    base_url = sim_server()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", base_url.removesuffix("/v1"))
    async with Runtime(Settings(llm_http_transport="httpx")):
        model = OpenAIChatModel("sim", base_url="http://provider.invalid/v1")
        with pytest.raises(LLMCallFailed, match=r"No route for POST http://provider\.invalid"):
            await model.generate("What is 2 + 2?")
