"""The batch lane's wire and edges, at the HTTP edge (httpx.MockTransport providers): OpenAI's and
Anthropic's batch lines and answers read as their APIs document them; a batch creation the
provider refuses fails its calls once (LLMCallFailed with the provider's status), a creation
that failed retryably is sent again without uploading its file twice, a look that failed is
retried with no slot; batches never exceed LLM_BATCH_SIZE nor the provider's byte cap; the
headers that say who asks go with every request of a batch; the batch journal's file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from asynceval import AnthropicChatModel, LLMCallFailed, OpenAIChatModel, Runtime, Settings
from asynceval.funnel import CallJournal, FileBatchJournal
from asynceval.funnel._batch_journal import batch_journal_path
from asynceval.funnel._batch_wire import AnthropicBatches, OpenAIBatches, wire_for

from ..conftest import EventLog

BASE = "http://provider.test/v1"


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }


class FakeOpenAI:
    """OpenAI's Files and Batch APIs, enough for the lane: every batch has ended by the first
    look; each line is answered `answer(body)` (a status and a body). `refuse` maps a request
    ("POST /v1/files") to the statuses its first sends are answered with."""

    def __init__(
        self,
        answer: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]] | None = None,
        refuse: dict[str, list[int]] | None = None,
    ) -> None:
        self.answer = answer or (lambda body: (200, completion(body["messages"][-1]["content"])))
        self.refuse = {k: list(v) for k, v in (refuse or {}).items()}
        self.sent: list[str] = []
        self.headers: list[httpx.Headers] = []
        self.files: dict[str, bytes] = {}
        self.batches: list[list[dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        name = f"{request.method} {path}"
        self.sent.append(name)
        self.headers.append(request.headers)
        pending = self.refuse.get(name) or self.refuse.get(f"{request.method} {_kind(path)}")
        if pending:
            status = pending.pop(0)
            return httpx.Response(status, json={"error": {"message": f"refused {status}"}})
        if name == "POST /v1/files":
            lines = [
                json.loads(raw.strip(b"\r"))
                for raw in request.content.split(b"\n")
                if raw.startswith(b'{"custom_id"')
            ]
            file_id = f"file-{len(self.files)}"
            self.files[file_id] = json.dumps(lines).encode()
            return httpx.Response(200, json={"id": file_id, "object": "file"})
        if name == "POST /v1/batches":
            created = json.loads(request.content)
            assert created["endpoint"] == "/v1/chat/completions"
            assert created["completion_window"] == "24h"
            assert len(created["metadata"]["asynceval_batch_key"]) == 32  # the journal's key
            lines = json.loads(self.files[created["input_file_id"]])
            self.batches.append(lines)
            return httpx.Response(200, json=self._batch(len(self.batches) - 1, "validating"))
        if request.method == "GET" and path.startswith("/v1/batches/"):
            return httpx.Response(200, json=self._batch(int(path.rsplit("_", 1)[1]), "completed"))
        if path.endswith("/content"):
            number = int(path.split("/")[3].rsplit("-", 1)[1])
            rows = []
            for line in self.batches[number]:
                status, body = self.answer(line["body"])
                response = {"status_code": status, "request_id": "r", "body": body}
                rows.append({"id": "x", "custom_id": line["custom_id"], "response": response})
            return httpx.Response(200, content="".join(json.dumps(r) + "\n" for r in rows))
        return httpx.Response(404, json={"error": {"message": f"no route {name}"}})

    def _batch(self, number: int, status: str) -> dict[str, Any]:
        total = len(self.batches[number])
        return {
            "id": f"batch_{number}",
            "object": "batch",
            "status": status,
            "output_file_id": f"out-{number}" if status == "completed" else None,
            "error_file_id": None,
            "request_counts": {"total": total, "completed": total, "failed": 0},
        }


def _kind(path: str) -> str:
    """`/v1/batches/batch_3` as `/v1/batches/ID`, to name a fault for any batch."""
    parts = path.split("/")
    return "/".join([*parts[:3], "ID", *parts[4:]]) if len(parts) > 3 else path


def settings(**values: Any) -> Settings:
    return Settings(
        llm_lane="batch",
        llm_batch_linger=0.1,
        llm_batch_poll=0.01,
        retry_initial_delay=0.01,
        retry_max_delay=0.02,
        **values,
    )


def model(provider: Any, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "m", base_url=BASE, api_key="sk-who", transport=httpx.MockTransport(provider), **kwargs
    )


async def ask_all(target: OpenAIChatModel | AnthropicChatModel, n: int) -> list[str]:
    texts: dict[int, str] = {}

    async def ask(i: int) -> None:
        texts[i] = (await target.generate(f"q{i}")).text

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(ask, i)
    return [texts[i] for i in range(n)]


def test_an_openai_line_carries_its_custom_id_endpoint_and_body_on_one_line() -> None:
    wire = OpenAIBatches(BASE, "chat/completions")
    line = wire.line("abc123", b'{\n  "model": "m",\n  "messages": []\n}')
    assert b"\n" not in line
    assert json.loads(line) == {
        "custom_id": "abc123",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": []},
    }
    assert json.loads(AnthropicBatches(BASE, "messages").line("x", b'{"a":1}')) == {
        "custom_id": "x",
        "params": {"a": 1},
    }


def test_openai_answers_are_read_from_the_output_and_error_files() -> None:
    wire = OpenAIBatches(BASE, "chat/completions")
    rows = [
        {"custom_id": "a", "response": {"status_code": 200, "body": completion("hi")}},
        {"custom_id": "b", "response": {"status_code": 500, "body": {"error": {"message": "x"}}}},
        {"custom_id": "c", "response": None, "error": {"code": "batch_expired", "message": "late"}},
        {"custom_id": "d", "response": None, "error": {"code": "batch_cancelled", "message": "c"}},
        {"custom_id": "e", "response": {"status_code": 400, "body": {"error": {"message": "no"}}}},
    ]
    content = "".join(json.dumps(r) + "\n" for r in rows).encode() + b"{broken\n"
    found = {r.custom_id: r for r in wire.results(content)}
    assert [(k, r.kind, r.status_code) for k, r in found.items()] == [
        ("a", "succeeded", 200),
        ("b", "errored", 500),
        ("c", "expired", None),
        ("d", "expired", None),
        ("e", "errored", 400),
    ]
    assert json.loads(found["a"].body) == completion("hi")


def test_an_openai_batch_that_failed_refuses_the_lines_its_errors_name() -> None:
    """A line the errors name did not validate: refused (400) as live; the others were not run:
    not done, sent again."""
    wire = OpenAIBatches(BASE, "chat/completions")
    error = {"code": "invalid_json", "message": "line 2 is not JSON", "line": 2}
    batch = {"status": "failed", "errors": {"object": "list", "data": [error]}}
    results = wire.failure(batch, ["a", "b", "c"])
    assert results is not None
    assert [(r.custom_id, r.kind, r.status_code) for r in results] == [
        ("a", "expired", None),
        ("b", "errored", 400),
        ("c", "expired", None),
    ]
    assert wire.failure({"status": "completed"}, ["a"]) is None


def test_anthropic_results_read_as_the_live_api_would_answer() -> None:
    wire = AnthropicBatches(BASE, "messages")

    def errored(kind: str) -> dict[str, Any]:
        return {"type": "errored", "error": {"type": "error", "error": {"type": kind}}}

    rows = [
        {"custom_id": "a", "result": {"type": "succeeded", "message": {"id": "m"}}},
        {"custom_id": "b", "result": errored("invalid_request_error")},
        {"custom_id": "c", "result": errored("api_error")},
        {"custom_id": "d", "result": errored("overloaded_error")},
        {"custom_id": "e", "result": {"type": "canceled"}},
        {"custom_id": "f", "result": {"type": "expired"}},
    ]
    content = "".join(json.dumps(r) + "\n" for r in rows).encode()
    assert [(r.custom_id, r.kind, r.status_code) for r in wire.results(content)] == [
        ("a", "succeeded", 200),
        ("b", "errored", 400),
        ("c", "errored", 500),
        ("d", "errored", 529),
        ("e", "expired", None),
        ("f", "expired", None),
    ]
    state = wire.state(
        {
            "processing_status": "in_progress",
            "request_counts": {"processing": 3, "succeeded": 1, "errored": 1, "expired": 0},
        }
    )
    assert (state.ended, state.completed, state.failed, state.total) == (False, 1, 1, 5)


def test_only_chat_completions_and_messages_have_a_batch_api() -> None:
    assert isinstance(wire_for(BASE, "/v1/chat/completions"), OpenAIBatches)
    assert isinstance(wire_for(BASE, "/v1/messages"), AnthropicBatches)
    assert wire_for("http://gw.test/openai/v1", "/openai/v1/chat/completions") is not None
    for path in ("/v1/responses", "/v1/embeddings", "/v1/models", "/v1/completions"):
        assert wire_for(BASE, path) is None


def test_the_batch_journal_appends_fsynced_records_beside_the_call_journal(
    tmp_path: Path,
) -> None:
    assert batch_journal_path(CallJournal(tmp_path / "journal.sqlite", "s")) == (
        tmp_path / "batches.jsonl"
    )
    assert batch_journal_path(CallJournal(tmp_path / "run.journal.sqlite", "s")) == (
        tmp_path / "run.batches.jsonl"
    )
    journal = FileBatchJournal(tmp_path / "batches.jsonl")
    journal.intent("k1", "openai", BASE, ["a", "b"])
    journal.created("k1", "batch_1")
    journal.ended("batch_1")
    with (tmp_path / "batches.jsonl").open("a") as file:
        file.write('{"record": "inte')  # a record cut short by a kill
    records = journal.records()
    assert [r["record"] for r in records] == ["intent", "created", "ended"]
    assert records[0]["custom_ids"] == ["a", "b"] and records[1]["batch_id"] == "batch_1"


async def test_a_creation_the_provider_refuses_fails_its_calls_once(event_log: EventLog) -> None:
    """A 401 on the file upload: every call of the batch fails with it, after one attempt (not
    retryable), and nothing more is sent."""
    provider = FakeOpenAI(refuse={"POST /v1/files": [401]})
    async with Runtime(settings()):
        target = model(provider)
        with pytest.raises(LLMCallFailed) as failed:
            await target.generate("q")
    assert failed.value.status_code == 401 and failed.value.attempts == 1
    assert provider.sent == ["POST /v1/files"]
    assert not event_log.named("batch_submitted")


async def test_a_creation_that_failed_retryably_is_sent_again_without_a_second_upload(
    event_log: EventLog,
) -> None:
    provider = FakeOpenAI(refuse={"POST /v1/batches": [503]})
    async with Runtime(settings()):
        assert await ask_all(model(provider), 3) == ["q0", "q1", "q2"]
    assert provider.sent.count("POST /v1/files") == 1
    assert provider.sent.count("POST /v1/batches") == 2
    retries = event_log.named("retry")
    assert [(r["agent"], r["status_code"]) for r in retries] == [("batch", 503)]
    assert len(event_log.named("acquired")) == 2  # one slot per attempt of the creation


async def test_a_look_that_failed_is_retried_holding_no_slot(event_log: EventLog) -> None:
    provider = FakeOpenAI(refuse={"GET /v1/batches/ID": [503, 502]})
    async with Runtime(settings()):
        assert await ask_all(model(provider), 2) == ["q0", "q1"]
    assert provider.sent.count("GET /v1/batches/batch_0") == 3
    assert len(event_log.named("acquired")) == 1  # the creation's slot only


async def test_a_refused_line_is_the_live_refusal_and_a_server_error_goes_again() -> None:
    """Per line: a 400 fails its call at once; a 500 goes into a later batch until answered."""
    seen: dict[str, int] = {}

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        text = body["messages"][-1]["content"]
        seen[text] = seen.get(text, 0) + 1
        if text == "q0":
            return 400, {"error": {"message": "bad request", "type": "invalid_request_error"}}
        if text == "q1" and seen[text] < 3:
            return 500, {"error": {"message": "server error"}}
        return 200, completion(text)

    provider = FakeOpenAI(answer)
    async with Runtime(settings(retry_max_attempts=3)):
        target = model(provider)
        with pytest.raises(LLMCallFailed) as failed:
            await target.generate("q0")
        assert (await target.generate("q1")).text == "q1"
    assert failed.value.status_code == 400 and failed.value.message == "bad request"
    assert seen["q0"] == 1 and seen["q1"] == 3


async def test_batches_keep_within_the_batch_size_and_the_providers_byte_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = FakeOpenAI()
    async with Runtime(settings(llm_batch_size=7)):
        await ask_all(model(provider), 20)
    assert [len(lines) for lines in provider.batches] == [7, 7, 6]
    provider = FakeOpenAI()
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q10"}]})
    line = len(OpenAIBatches(BASE, "chat/completions").line("0123456789abcdef", body.encode()))
    monkeypatch.setattr(OpenAIBatches, "max_bytes", 5 * (line + 1))  # five lines a batch
    async with Runtime(settings()):
        await ask_all(model(provider), 20)
    assert [len(lines) for lines in provider.batches] == [5, 5, 5, 5]


async def test_a_batch_carries_who_asks_and_not_what_one_request_is() -> None:
    """The model's credentials and API version go with each request of an Anthropic batch."""
    sent: list[httpx.Request] = []

    def provider(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        path = request.url.path
        if request.method == "POST" and path == "/v1/messages/batches":
            items = json.loads(request.content)["requests"]
            provider.items = items  # type: ignore[attr-defined]
            return httpx.Response(200, json={"id": "msgbatch_1", "processing_status": "ended"})
        if path.endswith("/results"):
            rows = [
                {
                    "custom_id": item["custom_id"],
                    "result": {
                        "type": "succeeded",
                        "message": {
                            "id": "m",
                            "type": "message",
                            "role": "assistant",
                            "model": "claude",
                            "content": [{"type": "text", "text": "ok"}],
                            "stop_reason": "end_turn",
                            "usage": {"input_tokens": 3, "output_tokens": 1},
                        },
                    },
                }
                for item in provider.items  # type: ignore[attr-defined]
            ]
            return httpx.Response(200, content="".join(json.dumps(r) + "\n" for r in rows))
        return httpx.Response(404, json={"error": {"message": path}})

    async with Runtime(settings()):
        claude = AnthropicChatModel(
            "claude", base_url=BASE, api_key="sk-ant", transport=httpx.MockTransport(provider)
        )
        assert await ask_all(claude, 2) == ["ok", "ok"]
    assert [(r.method, r.url.path) for r in sent] == [
        ("POST", "/v1/messages/batches"),
        ("GET", "/v1/messages/batches/msgbatch_1/results"),
    ]
    for request in sent:
        assert request.headers["x-api-key"] == "sk-ant"
        assert request.headers["anthropic-version"] == "2023-06-01"
    assert all(item["params"]["model"] == "claude" for item in provider.items)  # type: ignore[attr-defined]
