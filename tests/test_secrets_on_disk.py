"""No secret on disk: a provider echoing the API key in an error body reaches neither the results
file nor the events file, and scrubbing never corrupts a line, whatever the key looks like. A
placeholder key (`null`, `INFO`, `1000`: short or plain) is no secret: it is left in the text,
where blanking it would cut words and numbers out of answers, and every line stays valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval import Benchmark, OpenAIChatModel, Settings, Task, configure_logging
from asynceval._redact import secret_shaped


def _echoing_provider(key: str) -> httpx.MockTransport:
    """Answers 401 quoting the key it was sent, as OpenAI's 401 does."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"].removeprefix("Bearer ")
        message = f"Incorrect API key provided: {sent}. You can find your API key at ..."
        return httpx.Response(401, json={"error": {"message": message, "code": "invalid_api_key"}})

    return httpx.MockTransport(handler)


class OneCall(Benchmark):
    def __init__(self, model: OpenAIChatModel) -> None:
        super().__init__()
        self.model = model

    async def setup_agents(self, agent_data: Any, env: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            return (await self.model.generate(str(query))).text

        return [agent], {}


KEYS = [
    "sk-live-0123456789abcdef",
    "null",
    "INFO",
    "1000",
    "clé-secrète-ünïcode",
    "line1\nline2-secret",
    'quote"back\\slash',
]


@pytest.mark.parametrize("key", KEYS)
async def test_an_echoed_key_reaches_no_file_and_every_line_stays_valid_json(
    tmp_path: Path, key: str
) -> None:
    events_path = tmp_path / "events.jsonl"
    configure_logging(Settings(log_file=str(events_path), log_level="DEBUG"))
    model = OpenAIChatModel(
        "m", base_url="http://provider.test/v1", api_key=key, transport=_echoing_provider(key)
    )
    results = tmp_path / "results.jsonl"
    async with model:
        (report,) = await OneCall(model).run([Task(query="hi", id="t")], results_path=results)
    configure_logging(Settings(), stream=None)  # closes the events file
    assert report["status"] != "success"
    for path in (results, events_path):
        text = path.read_text()
        records = [json.loads(line) for line in text.splitlines() if line.strip()]  # all valid
        leaked = [s for s in _strings(records) if key in s]
        if secret_shaped(key):
            assert not leaked, path.name
        elif path == results:  # a placeholder is the provider's words, kept as they were
            assert leaked and "[redacted]" not in text, path.name
    events = [json.loads(line) for line in events_path.read_text().splitlines()]
    if key.isascii():  # httpx refuses a non-ASCII header before anything is sent
        acquired = [e for e in events if e["event"] == "acquired"]
        assert acquired and all(isinstance(e["active_slots"], int) for e in acquired)
        failed = [e for e in events if e["event"] == "llm_call_failed"]
        assert failed and failed[0]["status_code"] == 401
        assert ("[redacted]" in failed[0]["error"]) is secret_shaped(key)


def _strings(value: Any) -> list[str]:
    """Every string in a parsed JSON value, keys included (numbers and nulls are not text)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(s for item in value.values() for s in _strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []
