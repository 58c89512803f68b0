"""The providers' batch APIs on the wire: what a batch's requests look like, and what their
answers mean (DESIGN section 16). No state, no sending: `asynceval.funnel._batcher` sends.

- OpenAI (`OpenAIBatches`): the lines go as one JSONL file (`POST /v1/files`, purpose `batch`),
  then `POST /v1/batches` (`/v1/chat/completions`, completion window 24h) creates the batch; a
  look is `GET /v1/batches/{id}`; the answers are the output file and the error file
  (`GET /v1/files/{id}/content`), one line per request: `{"custom_id", "response":
  {"status_code", "body"}, "error"}` (an expired line is an error with code `batch_expired`).
  At most 50,000 lines and 200 MB a file.
- Anthropic (`AnthropicBatches`): `POST /v1/messages/batches` with `{"requests": [{"custom_id",
  "params"}]}`; a look is `GET /v1/messages/batches/{id}`; once `processing_status` is `ended`,
  `GET .../results` gives one line per request, `{"custom_id", "result": {"type": "succeeded" |
  "errored" | "canceled" | "expired", ...}}`. At most 100,000 requests and 256 MB a batch.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    import httpx

Kind = Literal["succeeded", "errored", "expired"]
"""What became of one line: answered (any 2xx), refused or failed (an error status, perhaps
retryable), or not done (expired, or its batch was cancelled or lost): sent again if allowed."""

Post = Callable[["httpx.Request"], Awaitable[dict[str, Any]]]
"""Sends one request of a batch's creation and returns its JSON body (raises `ProviderError`
for an error status)."""

_MARGIN = 0.98
"""The share of a provider's byte cap a batch fills: its framing (the JSON around the lines)
needs the rest."""

METADATA_KEY = "asynceval_batch_key"
"""An OpenAI batch's metadata key holding its key in the run's batch journal."""

_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""Anthropic's error types as the HTTP statuses its live API answers them with."""


class LineResult(NamedTuple):
    """One line's answer (see `Kind`). `status_code` and `body` are what the live endpoint would
    have answered (a JSON body; None for a line not done). `final`: not to be sent again (its
    batch could not be made, after the funnel's own retries)."""

    custom_id: str
    kind: Kind
    status_code: int | None
    body: bytes
    final: bool = False

    @property
    def succeeded(self) -> bool:
        return self.kind == "succeeded"


class BatchState(NamedTuple):
    """A look at a batch: the provider's status, whether it has ended, and its line counts."""

    status: str
    ended: bool
    completed: int
    failed: int
    total: int


def compact(body: bytes) -> bytes:
    """A JSON body on one line (JSONL), as it is when it holds no newline already."""
    if b"\n" not in body and b"\r" not in body:
        return body
    return json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False).encode()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _jsonl(content: bytes) -> Iterator[dict[str, Any]]:
    for raw in content.splitlines():
        if raw.strip():
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a broken line: its request is not answered, sent again
            if isinstance(line, dict):
                yield line


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class BatchWire:
    """One provider's batch API (see the module): subclasses say how."""

    provider: str
    max_requests: int
    max_bytes: int
    status_field: str
    """The field of a batch object that says where it is (`status`, `processing_status`)."""
    statuses: frozenset[str]
    """Every value the provider documents for it: anything else is no batch object."""

    def unknown_status(self, batch: dict[str, Any]) -> str | None:
        """None for a batch object with a known status; else one line saying what came instead
        (a server that answers every path with something else, such as a chat completion,
        would otherwise be looked at forever as a batch still in progress)."""
        status = batch.get(self.status_field)
        if isinstance(status, str) and status in self.statuses:
            return None
        what = "no" if status is None else f"an unknown ({str(status)[:40]!r})"
        return (
            f"the answer is no {self.provider} batch object: {what} `{self.status_field}` "
            f"field (is {self.base} a batch API?)"
        )

    def __init__(self, base: str, suffix: str) -> None:
        self.base = base  # the API's base URL, e.g. https://api.openai.com/v1
        self.suffix = suffix  # the inference path under it, e.g. chat/completions

    @property
    def endpoint(self) -> str:
        """The endpoint its lines are for (`/v1/chat/completions`)."""
        return "/v1/" + self.suffix

    def line(self, custom_id: str, body: bytes) -> bytes:
        """One request as the batch carries it (a JSON object, no newline)."""
        raise NotImplementedError

    async def create(
        self, post: Post, headers: dict[str, str], lines: list[bytes], memo: dict[str, str]
    ) -> dict[str, Any]:
        """Create the batch of `lines` and return the provider's batch object. `memo` holds the
        batch's key (`batch_key`, journaled before) and keeps what an attempt made (an uploaded
        file) for the next attempt."""
        raise NotImplementedError

    def look(self, batch_id: str, headers: dict[str, str]) -> httpx.Request:
        """The request for a look at the batch."""
        raise NotImplementedError

    def state(self, batch: dict[str, Any]) -> BatchState:
        """What a batch object says."""
        raise NotImplementedError

    def result_requests(
        self, batch: dict[str, Any], headers: dict[str, str]
    ) -> list[httpx.Request]:
        """The requests whose bodies hold an ended batch's answers."""
        raise NotImplementedError

    def results(self, content: bytes) -> Iterator[LineResult]:
        """The lines' answers in one body `result_requests` got."""
        raise NotImplementedError

    def failure(self, batch: dict[str, Any], custom_ids: list[str]) -> list[LineResult] | None:
        """A batch refused whole (OpenAI's `failed`): an answer for each of its lines (in
        `custom_ids`, in the order they were sent); None for a batch that ran."""
        return None

    def cancel(self, batch_id: str, headers: dict[str, str]) -> httpx.Request:
        """The request that cancels the batch."""
        raise NotImplementedError

    def _request(
        self, method: str, path: str, headers: dict[str, str], **kwargs: Any
    ) -> httpx.Request:
        import httpx

        request = httpx.Request(method, f"{self.base}/{path}", headers=headers, **kwargs)
        request.read()  # a multipart body as bytes: sent again as it is by a retry
        return request


class OpenAIBatches(BatchWire):
    """OpenAI's Batch API (see the module)."""

    provider = "openai"
    max_requests = 50_000
    max_bytes = int(200 * 1024 * 1024 * _MARGIN)

    def line(self, custom_id: str, body: bytes) -> bytes:
        head = {"custom_id": custom_id, "method": "POST", "url": self.endpoint}
        return _dumps(head)[:-1] + b',"body":' + compact(body) + b"}"

    async def create(
        self, post: Post, headers: dict[str, str], lines: list[bytes], memo: dict[str, str]
    ) -> dict[str, Any]:
        file_id = memo.get("file_id")
        if file_id is None:
            content = b"\n".join(lines) + b"\n"
            upload = self._request(
                "POST",
                "files",
                headers,
                files={"file": ("batch.jsonl", content, "application/jsonl")},
                data={"purpose": "batch"},
            )
            memo["file_id"] = file_id = str((await post(upload))["id"])
        body: dict[str, Any] = {
            "input_file_id": file_id,
            "endpoint": self.endpoint,
            "completion_window": "24h",
        }
        if "batch_key" in memo:  # a resumed run finds a batch whose id it never heard this way
            body["metadata"] = {METADATA_KEY: memo["batch_key"]}
        return await post(self._request("POST", "batches", headers, json=body))

    status_field = "status"
    statuses = frozenset(
        (
            "validating",
            "failed",
            "in_progress",
            "finalizing",
            "completed",
            "expired",
            "cancelling",
            "cancelled",
        )
    )

    def look(self, batch_id: str, headers: dict[str, str]) -> httpx.Request:
        return self._request("GET", f"batches/{batch_id}", headers)

    def state(self, batch: dict[str, Any]) -> BatchState:
        status = str(batch.get("status"))
        counts = batch.get("request_counts") or {}
        return BatchState(
            status,
            status in ("completed", "failed", "expired", "cancelled"),
            _count(counts.get("completed")),
            _count(counts.get("failed")),
            _count(counts.get("total")),
        )

    def result_requests(
        self, batch: dict[str, Any], headers: dict[str, str]
    ) -> list[httpx.Request]:
        files = [batch.get("output_file_id"), batch.get("error_file_id")]
        return [self._request("GET", f"files/{f}/content", headers) for f in files if f]

    def results(self, content: bytes) -> Iterator[LineResult]:
        for line in _jsonl(content):
            custom_id = line.get("custom_id")
            if not isinstance(custom_id, str):
                continue
            response = line.get("response")
            error = line.get("error")
            if isinstance(response, dict) and isinstance(response.get("status_code"), int):
                status = int(response["status_code"])
                body = _dumps(response.get("body"))
                kind: Kind = "succeeded" if status < 300 else "errored"
                yield LineResult(custom_id, kind, status, body)
            elif isinstance(error, dict) and error.get("code") in (
                "batch_expired",
                "batch_cancelled",
            ):
                yield LineResult(custom_id, "expired", None, _dumps({"error": error}))
            else:  # an error of its own (the line did not validate): refused
                yield LineResult(custom_id, "errored", 400, _dumps({"error": error}))

    def failure(self, batch: dict[str, Any], custom_ids: list[str]) -> list[LineResult] | None:
        """A line its `errors` name (by number) did not validate: refused (400), as the live
        endpoint would refuse it. The others were not run (the batch failed for a reason not
        theirs, or for another line): not done, sent again."""
        if batch.get("status") != "failed":
            return None
        errors = (batch.get("errors") or {}).get("data") or []
        named: dict[int, dict[str, Any]] = {}
        for error in errors:
            if isinstance(error, dict) and isinstance(error.get("line"), int):
                named.setdefault(error["line"], error)
        general = next((e for e in errors if isinstance(e, dict)), {"message": "batch failed"})
        found = []
        for number, custom_id in enumerate(custom_ids, start=1):
            error = named.get(number)
            if error is not None:
                body = {"error": {**error, "type": "invalid_request_error"}}
                found.append(LineResult(custom_id, "errored", 400, _dumps(body)))
            else:
                found.append(LineResult(custom_id, "expired", None, _dumps({"error": general})))
        return found

    def cancel(self, batch_id: str, headers: dict[str, str]) -> httpx.Request:
        return self._request("POST", f"batches/{batch_id}/cancel", headers)


class AnthropicBatches(BatchWire):
    """Anthropic's Message Batches API (see the module)."""

    provider = "anthropic"
    max_requests = 100_000
    max_bytes = int(256 * 1024 * 1024 * _MARGIN)

    def line(self, custom_id: str, body: bytes) -> bytes:
        return _dumps({"custom_id": custom_id})[:-1] + b',"params":' + compact(body) + b"}"

    async def create(
        self, post: Post, headers: dict[str, str], lines: list[bytes], memo: dict[str, str]
    ) -> dict[str, Any]:
        content = b'{"requests":[' + b",".join(lines) + b"]}"
        json_headers = {**headers, "content-type": "application/json"}
        return await post(self._request("POST", "messages/batches", json_headers, content=content))

    status_field = "processing_status"
    statuses = frozenset(("in_progress", "canceling", "ended"))

    def look(self, batch_id: str, headers: dict[str, str]) -> httpx.Request:
        return self._request("GET", f"messages/batches/{batch_id}", headers)

    def state(self, batch: dict[str, Any]) -> BatchState:
        status = str(batch.get("processing_status"))
        counts = batch.get("request_counts") or {}
        failed = sum(_count(counts.get(k)) for k in ("errored", "canceled", "expired"))
        completed = _count(counts.get("succeeded"))
        total = completed + failed + _count(counts.get("processing"))
        return BatchState(status, status == "ended", completed, failed, total)

    def result_requests(
        self, batch: dict[str, Any], headers: dict[str, str]
    ) -> list[httpx.Request]:
        return [self._request("GET", f"messages/batches/{batch['id']}/results", headers)]

    def results(self, content: bytes) -> Iterator[LineResult]:
        for line in _jsonl(content):
            custom_id = line.get("custom_id")
            result = line.get("result")
            if not isinstance(custom_id, str) or not isinstance(result, dict):
                continue
            kind = result.get("type")
            if kind == "succeeded":
                yield LineResult(custom_id, "succeeded", 200, _dumps(result.get("message")))
            elif kind == "errored":
                error = result.get("error")
                inner = error.get("error") if isinstance(error, dict) else None
                name = inner.get("type") if isinstance(inner, dict) else None
                status = _ERROR_STATUS.get(str(name), 500)
                yield LineResult(custom_id, "errored", status, _dumps(error))
            else:  # canceled, expired
                yield LineResult(custom_id, "expired", None, _dumps(result))

    def cancel(self, batch_id: str, headers: dict[str, str]) -> httpx.Request:
        return self._request("POST", f"messages/batches/{batch_id}/cancel", headers)


_WIRES: dict[str, type[BatchWire]] = {
    "chat/completions": OpenAIBatches,
    "messages": AnthropicBatches,
}


def wire_for(base: str, path: str) -> BatchWire | None:
    """The batch API that serves a POST to `path` (a URL's path) under the API base `base`
    (`endpoint_of`), or None when no batch API does (it goes live)."""
    from urllib.parse import urlsplit

    base_path = urlsplit(base).path.rstrip("/")
    suffix = path[len(base_path) :].strip("/") if path.startswith(base_path) else ""
    kind = _WIRES.get(suffix)
    return None if kind is None else kind(base, suffix)
