"""The official OpenAI SDK through `asynceval.interop`: its calls are spans of the same shape as
our models', children of the repetition that made them, streamed answers included."""

from __future__ import annotations

import contextlib
from typing import Any

import openai

from asynceval import Benchmark, Task
from asynceval.interop import openai_client
from asynceval.telemetry import REPETITION_SPAN

from ..conftest import EventLog
from .conftest import FAST, Recorded


class SdkAsk(Benchmark):
    """Each repetition asks through `openai.AsyncOpenAI` on the funnel (the embedded simulated
    provider): one plain completion, one streamed."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client: openai.AsyncOpenAI = openai_client(agent="sdk")

        async def agent(query: str) -> str:
            messages: Any = [{"role": "user", "content": query}]
            plain = await client.chat.completions.create(model="sdk-model", messages=messages)
            stream = await client.chat.completions.create(
                model="sdk-model",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _ in stream:
                pass
            return plain.choices[0].message.content or ""

        return [agent], {}


async def test_the_openai_sdks_calls_are_chat_spans_children_of_their_repetition(
    recorded: Recorded,
) -> None:
    await SdkAsk(settings=FAST, n_task_repeats=2).run([Task(id="q", query="what is 2+2?")])
    repetitions = {s.context.span_id: s for s in recorded.spans(REPETITION_SPAN)}
    calls = recorded.spans("chat sdk-model")
    assert len(repetitions) == 2 and len(calls) == 4
    for call in calls:
        assert call.parent is not None and call.parent.span_id in repetitions
        a = call.attributes
        assert call.kind.name == "CLIENT"
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "sdk-model"
        assert a["asynceval.agent"] == "sdk"
        assert a["server.address"] == "asynceval-sim"
        # the stream's span ends once it is read: its usage (include_usage) is known then
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    plain = [c for c in calls if "gen_ai.response.model" in c.attributes]
    assert len(plain) == 2  # the JSON answers say their model; a stream's body is the SDK's
    assert {c.attributes["gen_ai.response.model"] for c in plain} == {"sdk-model"}


async def test_a_request_that_is_no_inference_gets_no_span(
    recorded: Recorded, event_log: EventLog
) -> None:
    """A model list through the funnel: a call (it took a slot), but no chat span and no
    inference metrics."""
    client: openai.AsyncOpenAI = openai_client()
    with contextlib.suppress(openai.APIStatusError):  # whatever the simulator says of it
        await client.models.list()
    assert event_log.named("acquired")
    assert recorded.spans() == []
    assert "gen_ai.client.inference.duration" not in recorded.metrics()
