"""OpenAI's Batch API: `POST /v1/batches`, `GET /v1/batches` (list), `GET /v1/batches/{id}`,
`POST /v1/batches/{id}/cancel`, for `/v1/chat/completions` and `/v1/responses` lines.

A batch's input file is read when it is created. An input the API would refuse (a line that is
not JSON, lacks `custom_id`, `method`, `url` or `body`, a method other than POST, a `url` other
than the batch's endpoint, a `custom_id` used twice, models that differ, an empty file, more
than 50,000 lines) makes a batch that fails, its `errors` naming each line; so does an injected
failure (`SimConfig.batch_fail_first`, `batch_fail_rate`). Otherwise its status goes
validating, in_progress (from a tenth of `batch_delay`), finalizing (from nine tenths), then
completed (or expired, when a line expired) once `batch_delay` has passed. Cancelling it before
then answers `cancelling`, and it is `cancelled` from then on, every line `batch_cancelled`.

When it ends, its lines are answered (`_batch_lines`): the 200 answers go to the output file,
the others (an injected 500, a 400 for a body the live route refuses) and the expired and
cancelled lines to the error file, each line `{"id", "custom_id", "response": {"status_code",
"request_id", "body"}, "error"}` as OpenAI writes them (`response` null and `error` set for an
expired or cancelled line).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asynceval.sim._asgi import Call, Reply
from asynceval.sim._batch_input import Input, batch_error, read_input
from asynceval.sim._batch_lines import BatchLines, Line, Outcome, Timeline, new_id
from asynceval.sim._dialect import Dialect, Usage
from asynceval.sim._files import FileStore
from asynceval.sim._openai import OPENAI
from asynceval.sim._openai_errors import error, invalid, listing, not_found, ok
from asynceval.sim._responses import RESPONSES
from asynceval.sim._stats import BatchCounts

ENDPOINTS: dict[str, Dialect] = {"/v1/chat/completions": OPENAI, "/v1/responses": RESPONSES}
"""The endpoints a batch may be for."""
_DAY = 24 * 3600
_EXPIRED = "This request could not be executed before the completion window expired."
_CANCELLED = "This request was not executed because the batch was cancelled."


@dataclass(slots=True)
class _End:
    """How a batch ended: its status, when, its counts, files and usage."""

    status: str
    at: float
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    usage: Usage = field(default_factory=lambda: Usage(0, 0))


@dataclass(slots=True)
class _Batch:
    """One batch: what was asked, its planned lines (none if it fails), and its end."""

    id: str
    endpoint: str
    input_file_id: str
    metadata: Mapping[str, str] | None
    model: str | None
    timeline: Timeline
    lines: list[Line]
    errors: list[dict[str, Any]]
    cancelling_at: float | None = None
    end: _End | None = None


class OpenAIBatches:
    """The batches of the OpenAI Batch API, in memory until the provider is `reset()`."""

    __slots__ = ("_batches", "_counts", "_files", "_lines", "_lock")

    def __init__(self, lines: BatchLines, files: FileStore, counts: BatchCounts) -> None:
        self._lines = lines
        self._files = files
        self._counts = counts
        self._batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every batch."""
        with self._lock:
            self._batches.clear()

    def handle(self, call: Call, parts: list[str]) -> Reply:
        """Answer a call under `/v1/batches`; `parts` is the path after it, split on "/"."""
        if not parts:
            return self._create(call) if call.method == "POST" else self._list(call)
        batch = self._batches.get(parts[0])
        if batch is None:
            return not_found(f"No batch found with id '{parts[0]}'.", "batch_id")
        if len(parts) == 2:
            return self._cancel(batch)
        return ok(self._document(batch))

    def _create(self, call: Call) -> Reply:
        try:
            request = json.loads(call.body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            return invalid("The request body must be a JSON object.", None)
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(request.get(name), str):
                message = f"Missing required parameter: '{name}'."
                return invalid(message, name, "missing_required_parameter")
        endpoint = request["endpoint"]
        if endpoint not in ENDPOINTS:
            supported = " and ".join(f"'{e}'" for e in ENDPOINTS)
            message = f"Invalid value for 'endpoint': {endpoint!r}. Supported values: {supported}."
            return invalid(message, "endpoint", "invalid_value")
        if request["completion_window"] != "24h":
            message = "Invalid value for 'completion_window': only '24h' is supported."
            return invalid(message, "completion_window", "invalid_value")
        metadata = request.get("metadata")
        if metadata is not None and not _is_metadata(metadata):
            message = "'metadata' must be an object of at most 16 string values."
            return invalid(message, "metadata", "invalid_value")
        stored = self._files.get(request["input_file_id"])
        if stored is None:
            return not_found(f"No such File object: {request['input_file_id']}", "input_file_id")
        if stored.purpose != "batch":
            message = f"The input file has purpose {stored.purpose!r}; a batch needs 'batch'."
            return invalid(message, "input_file_id", "invalid_value")
        batch = self._start(request, read_input(stored.data, endpoint))
        return ok(self._document(batch, fresh=True))

    def _start(self, request: Mapping[str, Any], read: Input) -> _Batch:
        """Count the new batch, decide whether it fails, plan its lines and keep it."""
        entries, errors = read.entries, read.errors
        self._counts.created += 1
        self._counts.lines += read.lines
        endpoint = request["endpoint"]
        lines: list[Line] = []
        if not errors:
            digests = [self._lines.digest(endpoint, body) for _, body in entries]
            if self._lines.fails(digests):
                errors = [batch_error("batch_failed", "Simulated failure: the batch was not run.")]
            else:
                lines = [
                    self._lines.plan(custom_id, body, digest)
                    for (custom_id, body), digest in zip(entries, digests, strict=True)
                ]
        if errors:
            self._counts.failed += 1
        model = entries[0][1].get("model") if entries else None
        batch = _Batch(
            id=new_id("batch_"),
            endpoint=endpoint,
            input_file_id=request["input_file_id"],
            metadata=request.get("metadata"),
            model=model if isinstance(model, str) else None,
            timeline=Timeline(self._lines.config.batch_delay),
            lines=lines,
            errors=errors,
        )
        with self._lock:
            self._batches[batch.id] = batch
        return batch

    def _list(self, call: Call) -> Reply:
        with self._lock:
            batches = list(reversed(self._batches.values()))
        return listing(call, [self._document(batch) for batch in batches])

    def _cancel(self, batch: _Batch) -> Reply:
        self._settle(batch)
        with self._lock:
            end = batch.end
            if end is None and batch.cancelling_at is None:
                batch.cancelling_at = time.time()
        if end is not None and end.status != "cancelled":
            return error(409, f"Cannot cancel a batch with status '{end.status}'.")
        return ok(self._document(batch, settle=False))

    def _settle(self, batch: _Batch) -> None:
        """End the batch if it is due or was cancelled, once."""
        if batch.end is not None:
            return
        if batch.cancelling_at is None and not batch.timeline.due():
            return
        with self._lock:
            if batch.end is None:
                batch.end = self._finish(batch)

    def _finish(self, batch: _Batch) -> _End:
        """Answer the lines, write the output and error files, count what became of them."""
        counts = self._counts
        if batch.cancelling_at is not None:
            rows = [
                _row(line.custom_id, None, "batch_cancelled", _CANCELLED) for line in batch.lines
            ]
            counts.canceled += len(rows)
            end = _End("cancelled", batch.cancelling_at, failed=len(rows))
            end.error_file_id = self._write(batch, "error", rows)
            return end
        if batch.errors:
            return _End("failed", batch.timeline.at(1.0))
        dialect = ENDPOINTS[batch.endpoint]
        answered: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        prompt = completion = 0
        for line in batch.lines:
            if line.outcome is Outcome.EXPIRED:
                failed.append(_row(line.custom_id, None, "batch_expired", _EXPIRED))
                counts.expired += 1
                continue
            result = self._lines.answer(dialect, line)
            row = _row(line.custom_id, (result.status, result.document))
            if result.usage is not None:
                answered.append(row)
                prompt += result.usage.prompt
                completion += result.usage.completion
            else:
                failed.append(row)
                counts.errored += 1
        counts.succeeded += len(answered)
        counts.prompt_tokens += prompt
        counts.completion_tokens += completion
        expired = any(line.outcome is Outcome.EXPIRED for line in batch.lines)
        return _End(
            "expired" if expired else "completed",
            batch.timeline.at(1.0),
            completed=len(answered),
            failed=len(failed),
            output_file_id=self._write(batch, "output", answered),
            error_file_id=self._write(batch, "error", failed),
            usage=Usage(prompt, completion),
        )

    def _write(self, batch: _Batch, kind: str, rows: list[dict[str, Any]]) -> str | None:
        if not rows:
            return None
        data = "".join(json.dumps(row) + "\n" for row in rows).encode()
        return self._files.add(f"batch_{batch.id}_{kind}.jsonl", "batch_output", data).id

    def _document(
        self, batch: _Batch, *, fresh: bool = False, settle: bool = True
    ) -> dict[str, Any]:
        """The `batch` object exactly as OpenAI shapes it; `fresh`: as `create` answers it."""
        if settle and not fresh:
            self._settle(batch)
        timeline = batch.timeline
        created = int(timeline.created)
        document: dict[str, Any] = {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "model": batch.model,
            "errors": None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": created,
            "in_progress_at": None,
            "expires_at": created + _DAY,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(batch.lines), "completed": 0, "failed": 0},
            "usage": _usage(Usage(0, 0)),
            "metadata": batch.metadata,
        }
        if fresh:
            return document
        end = batch.end
        if end is not None:
            _ended(document, batch, end)
        elif batch.cancelling_at is not None:
            document["status"] = "cancelling"
            document["cancelling_at"] = int(batch.cancelling_at)
        elif not batch.errors:
            _running(document, timeline)
        return document


def _running(document: dict[str, Any], timeline: Timeline) -> None:
    """The status of a batch that goes ahead and has not ended, by how far along it is."""
    progress = timeline.progress()
    if progress >= 0.1:
        document["status"] = "in_progress"
        document["in_progress_at"] = int(timeline.at(0.1))
    if progress >= 0.9:
        document["status"] = "finalizing"
        document["finalizing_at"] = int(timeline.at(0.9))


def _ended(document: dict[str, Any], batch: _Batch, end: _End) -> None:
    """The fields of an ended batch."""
    document["status"] = end.status
    at = int(end.at)
    if end.status == "failed":
        document["failed_at"] = at
        document["errors"] = {"object": "list", "data": batch.errors}
        document["request_counts"]["total"] = 0
        return
    if end.status == "cancelled":
        document["cancelling_at"] = document["cancelled_at"] = at
    else:
        document["in_progress_at"] = int(batch.timeline.at(0.1))
        document["finalizing_at"] = int(batch.timeline.at(0.9))
        document["completed_at" if end.status == "completed" else "expired_at"] = at
    document["request_counts"].update(completed=end.completed, failed=end.failed)
    document["output_file_id"] = end.output_file_id
    document["error_file_id"] = end.error_file_id
    document["usage"] = _usage(end.usage)


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt + usage.completion,
    }


def _row(
    custom_id: str,
    response: tuple[int, dict[str, Any]] | None,
    code: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """One line of an output or error file."""
    return {
        "id": new_id("batch_req_"),
        "custom_id": custom_id,
        "response": None
        if response is None
        else {"status_code": response[0], "request_id": new_id("req_"), "body": response[1]},
        "error": None if code is None else {"code": code, "message": message},
    }


def _is_metadata(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) <= 16
        and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    )
