"""A scripted OpenAI-compatible provider for the judge panel tests (an httpx.MockTransport edge)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from asynceval import OpenAIChatModel, Settings
from asynceval.limits import ConcurrencyController

AGENTS = ["judge-strict", "judge-lenient", "judge-expert"]
DIMENSIONS = [f"dim{i}" for i in range(10)]
FAST: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}

Answer = Callable[[dict[str, Any], str, str], httpx.Response]
"""(request body, agent, dimension or "batch" or "text") -> the provider's response."""


def completion(content: str) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10},
        },
    )


def opinion(criterion_id: str, score: Any = 4, argument: str = "fine") -> dict[str, Any]:
    return {"criterion_id": criterion_id, "score": score, "argument": argument}


def good_answer(body: dict[str, Any], agent: str, dimension: str) -> httpx.Response:
    """Valid answers for every kind of request: batched, individual and plain text."""
    if dimension == "batch":
        return completion(json.dumps({"opinions": [opinion(d) for d in enum_of(body)]}))
    if body.get("response_format") is None:
        return completion(f"Here you go:\n```json\n{json.dumps(opinion(dimension))}\n```")
    return completion(json.dumps(opinion(dimension)))


def enum_of(body: dict[str, Any]) -> list[str]:
    schema = body["response_format"]["json_schema"]["schema"]
    if "opinions" in schema["properties"]:
        schema = schema["properties"]["opinions"]["items"]
    return list(schema["properties"]["criterion_id"]["enum"])


def classify(body: dict[str, Any]) -> tuple[str, str]:
    """(agent, dimension) of a request: the judge named in the system prompt; "batch" for a
    batched call, else the criterion from the schema or from the JSON asked for in the text."""
    system = body["messages"][0]["content"]
    agent = next(a for a in AGENTS if f"You are {a}," in system)
    fmt = body.get("response_format")
    if fmt is None:
        match = re.search(r'"criterion_id": "([^"]+)"', system)
        assert match is not None, system
        return agent, match.group(1)
    if fmt["json_schema"]["name"] == "judicial_opinions":
        return agent, "batch"
    return agent, enum_of(body)[0]


class ScriptedProvider:
    """Counts requests per (agent, dimension) and per kind, and answers with `answer`."""

    def __init__(self, answer: Answer = good_answer) -> None:
        self.answer = answer
        self.requests: Counter[tuple[str, str]] = Counter()
        self.structured = 0
        self.unstructured = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        agent, dimension = classify(body)
        self.requests[(agent, dimension)] += 1
        if body.get("response_format") is None:
            self.unstructured += 1
        else:
            self.structured += 1
        return self.answer(body, agent, dimension)

    def model(self, **settings: Any) -> OpenAIChatModel:
        return OpenAIChatModel(
            "m",
            base_url="http://provider.test/v1",
            settings=Settings(**{**FAST, **settings}),
            controller=ConcurrencyController(5),
            transport=httpx.MockTransport(self),
        )
