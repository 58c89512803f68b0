"""A slot freed by a finished call goes to the next caller in line, whose request is out before
the first caller goes on with its answer: the slot is not left idle while that caller parses,
evaluates and reports (with many calls in line, that idle time is throughput lost)."""

from __future__ import annotations

import json

import anyio
import httpx
from anyio import wait_all_tasks_blocked

from asynceval import OpenAIChatModel, Runtime, Settings

from .test_direct_send import ANSWER


def provider(arrived: list[str]) -> httpx.MockTransport:
    """A provider that notes each request's question as it arrives, then answers 10 ms later."""

    async def handler(request: httpx.Request) -> httpx.Response:
        arrived.append(json.loads(request.content)["messages"][0]["content"])
        await anyio.sleep(0.01)
        return httpx.Response(200, json=ANSWER)

    return httpx.MockTransport(handler)


async def test_the_next_caller_in_line_sends_before_the_first_goes_on() -> None:
    arrived: list[str] = []
    at_return: dict[str, list[str]] = {}
    async with Runtime(Settings(max_concurrent_llm_calls=1)):
        model = OpenAIChatModel(
            "m", base_url="http://provider.test/v1", api_key="sk-test", transport=provider(arrived)
        )

        async def ask(question: str) -> None:
            await model.generate(question)
            at_return[question] = list(arrived)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "first")
            await wait_all_tasks_blocked()  # the first holds the only slot
            tg.start_soon(ask, "second")
            await wait_all_tasks_blocked()  # the second waits in line
            assert arrived == ["first"]
    assert at_return == {"first": ["first", "second"], "second": ["first", "second"]}
