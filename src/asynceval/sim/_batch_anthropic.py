"""Anthropic's Message Batches API: `POST /v1/messages/batches`, `GET /v1/messages/batches`
(list), `GET` and `DELETE /v1/messages/batches/{id}`, `GET .../{id}/results`,
`POST .../{id}/cancel`.

A create is refused (400) for requests that are not a non-empty list of `{custom_id, params}`,
a `custom_id` not of 1 to 64 letters, digits, `_` and `-`, or used twice; `params` are checked
only when the batch is processed, as Anthropic does: a request the live route refuses is an
`errored` result. A batch is `in_progress` until `batch_delay` has passed, then `ended`; a
cancel before that answers `canceling` and the batch has ended from then on, every request
`canceled`. An injected failure (`SimConfig.batch_fail_first`, `batch_fail_rate`) ends the
batch with every request errored (`api_error`): the API has no failed batches. Results are
JSONL lines `{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored",
"error"} | {"type": "canceled"} | {"type": "expired"}}`, in request order.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asynceval.sim._anthropic import ANTHROPIC
from asynceval.sim._asgi import Call, Reply
from asynceval.sim._batch_lines import (
    SERVER_ERROR,
    BatchLines,
    Line,
    Outcome,
    Timeline,
    new_id,
    rfc3339,
)
from asynceval.sim._stats import BatchCounts

PATH = "/v1/messages"
"""The live route whose answers a message batch's results are."""
MAX_REQUESTS = 100_000
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_DAY = 24 * 3600
_KINDS = ("succeeded", "errored", "canceled", "expired")


@dataclass(slots=True)
class _End:
    """How a batch ended: when, its results file and its counts by result type."""

    at: float
    results: bytes
    counts: dict[str, int]


@dataclass(slots=True)
class _MessageBatch:
    id: str
    timeline: Timeline
    lines: list[Line]
    cancel_at: float | None = None
    end: _End | None = None


class AnthropicBatches:
    """The batches of the Message Batches API, in memory until deleted or `reset()`."""

    __slots__ = ("_batches", "_counts", "_lines", "_lock")

    def __init__(self, lines: BatchLines, counts: BatchCounts) -> None:
        self._lines = lines
        self._counts = counts
        self._batches: dict[str, _MessageBatch] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every batch."""
        with self._lock:
            self._batches.clear()

    def handle(self, call: Call, parts: list[str]) -> Reply:
        """Answer a call under `/v1/messages/batches`; `parts` is the path after it."""
        if not parts:
            return self._create(call) if call.method == "POST" else self._list(call)
        batch = self._batches.get(parts[0])
        if batch is None:
            return _error(404, f"No message batch found with id '{parts[0]}'.")
        self._settle(batch)
        if len(parts) == 2 and parts[1] == "cancel":
            return self._cancel(batch, call.origin)
        if len(parts) == 2:
            if batch.end is None:
                return _error(400, f"Message batch {batch.id} has not ended yet.")
            return Reply(200, batch.end.results, b"application/x-jsonl")
        if call.method == "DELETE":
            return self._delete(batch)
        return _ok(self._document(batch, call.origin))

    def _create(self, call: Call) -> Reply:
        try:
            request = json.loads(call.body)
        except ValueError:
            request = None
        requests = request.get("requests") if isinstance(request, dict) else None
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests: must be a non-empty array of {custom_id, params}")
        if len(requests) > MAX_REQUESTS:
            return _error(400, f"requests: at most {MAX_REQUESTS} requests fit in a batch")
        seen: set[str] = set()
        for index, item in enumerate(requests):
            problem = _problem(item, seen)
            if problem is not None:
                return _error(400, f"requests.{index}.{problem}")
            seen.add(item["custom_id"])
        self._counts.created += 1
        self._counts.lines += len(requests)
        digests = [self._lines.digest(PATH, item["params"]) for item in requests]
        if self._lines.fails(digests):
            self._counts.failed += 1
            lines = [
                Line(item["custom_id"], item["params"], digest, -1, Outcome.ERROR)
                for item, digest in zip(requests, digests, strict=True)
            ]
        else:
            lines = [
                self._lines.plan(item["custom_id"], item["params"], digest)
                for item, digest in zip(requests, digests, strict=True)
            ]
        batch = _MessageBatch(new_id("msgbatch_"), Timeline(self._lines.config.batch_delay), lines)
        with self._lock:
            self._batches[batch.id] = batch
        return _ok(self._document(batch, call.origin))

    def _list(self, call: Call) -> Reply:
        with self._lock:
            batches = list(reversed(self._batches.values()))
        for batch in batches:
            self._settle(batch)
        text = call.query.get("limit", "20")
        limit = int(text) if text.isdigit() else 0
        if not 1 <= limit <= 1000:
            return _error(400, "limit: must be an integer from 1 to 1000")
        ids = [batch.id for batch in batches]
        after, before = call.query.get("after_id"), call.query.get("before_id")
        start, stop = 0, len(batches)
        if after is not None:
            start = ids.index(after) + 1 if after in ids else len(batches)
        if before is not None:
            stop = ids.index(before) if before in ids else 0
            start = max(start, stop - limit)
        page = batches[start : min(stop, start + limit)]
        more = start + limit < stop if before is None else start > 0
        return _ok(
            {
                "data": [self._document(batch, call.origin) for batch in page],
                "has_more": more,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            }
        )

    def _cancel(self, batch: _MessageBatch, origin: str) -> Reply:
        if batch.end is not None and batch.cancel_at is None:
            return _error(400, f"Message batch {batch.id} has ended and cannot be canceled.")
        with self._lock:
            if batch.cancel_at is None:
                batch.cancel_at = time.time()
        return _ok(self._document(batch, origin))

    def _delete(self, batch: _MessageBatch) -> Reply:
        if batch.end is None:
            message = f"Message batch {batch.id} is still processing; cancel it first."
            return _error(400, message)
        with self._lock:
            self._batches.pop(batch.id, None)
        return _ok({"id": batch.id, "type": "message_batch_deleted"})

    def _settle(self, batch: _MessageBatch) -> None:
        """End the batch if it is due or a cancel was asked for (and answered), once."""
        if batch.end is not None:
            return
        if batch.cancel_at is None and not batch.timeline.due():
            return
        with self._lock:
            if batch.end is None:
                batch.end = self._finish(batch)

    def _finish(self, batch: _MessageBatch) -> _End:
        """Each request's result, in request order, and the counts by type."""
        counts = dict.fromkeys(_KINDS, 0)
        rows: list[bytes] = []
        prompt = completion = 0
        for line in batch.lines:
            result: dict[str, Any]
            if batch.cancel_at is not None:
                result = {"type": "canceled"}
            elif line.outcome is Outcome.EXPIRED:
                result = {"type": "expired"}
            elif line.attempt < 0:  # the batch failed
                failure = ANTHROPIC.error(SERVER_ERROR, "Simulated failure of the batch", None)
                result = {"type": "errored", "error": failure}
            else:
                answer = self._lines.answer(ANTHROPIC, line)
                if answer.usage is None:
                    result = {"type": "errored", "error": answer.document}
                else:
                    result = {"type": "succeeded", "message": answer.document}
                    prompt += answer.usage.prompt
                    completion += answer.usage.completion
            counts[result["type"]] += 1
            rows.append(json.dumps({"custom_id": line.custom_id, "result": result}).encode())
        tally = self._counts
        tally.succeeded += counts["succeeded"]
        tally.errored += counts["errored"]
        tally.canceled += counts["canceled"]
        tally.expired += counts["expired"]
        tally.prompt_tokens += prompt
        tally.completion_tokens += completion
        at = batch.cancel_at if batch.cancel_at is not None else batch.timeline.at(1.0)
        return _End(at, b"".join(row + b"\n" for row in rows), counts)

    def _document(self, batch: _MessageBatch, origin: str) -> dict[str, Any]:
        """The `message_batch` object exactly as Anthropic shapes it."""
        end = batch.end
        if end is not None:
            status = "ended"
            counts = {"processing": 0, **end.counts}
        else:
            status = "in_progress" if batch.cancel_at is None else "canceling"
            counts = {"processing": len(batch.lines), **dict.fromkeys(_KINDS, 0)}
        created = batch.timeline.created
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": None if end is None else rfc3339(end.at),
            "created_at": rfc3339(created),
            "expires_at": rfc3339(created + _DAY),
            "archived_at": None,
            "cancel_initiated_at": None if batch.cancel_at is None else rfc3339(batch.cancel_at),
            "results_url": None
            if end is None
            else f"{origin}/v1/messages/batches/{batch.id}/results",
        }


def _problem(item: Any, seen: set[str]) -> str | None:
    """What is wrong with one of a create's requests (the path under it and why), if anything."""
    if not isinstance(item, Mapping):
        return "custom_id: each request must be an object with custom_id and params"
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or _CUSTOM_ID.fullmatch(custom_id) is None:
        return "custom_id: must be 1 to 64 letters, digits, underscores or hyphens"
    if custom_id in seen:
        return f"custom_id: {custom_id!r} is used by another request; custom_ids must be unique"
    if not isinstance(item.get("params"), Mapping):
        return "params: Field required (an object of Messages API parameters)"
    return None


def _ok(document: dict[str, Any]) -> Reply:
    return Reply(200, json.dumps(document).encode())


def _error(status: int, message: str) -> Reply:
    return Reply(status, json.dumps(ANTHROPIC.error(status, message, None)).encode())
