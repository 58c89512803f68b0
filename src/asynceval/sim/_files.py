"""OpenAI's Files API, in memory: `POST /v1/files` (a multipart upload), `GET /v1/files` (list),
`GET /v1/files/{id}`, `GET /v1/files/{id}/content`, `DELETE /v1/files/{id}`.

Files are kept until deleted or the provider is `reset()`; a batch's output and error files
are added here when the batch ends (purpose `batch_output`).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from asynceval.sim._asgi import Call, Reply
from asynceval.sim._batch_lines import new_id
from asynceval.sim._openai_errors import invalid, listing, not_found, ok

PURPOSES = frozenset({"assistants", "batch", "fine-tune", "vision", "user_data", "evals"})
"""The purposes an upload may name."""

_PARAM = re.compile(r';\s*([\w*]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))')


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One file: its bytes and what the File object says of them."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def document(self) -> dict[str, Any]:
        """The `file` object exactly as OpenAI shapes it."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "expires_at": None,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


class FileStore:
    """The uploaded and produced files, by id, in the order they were added (thread-safe)."""

    __slots__ = ("_files", "_lock")

    def __init__(self) -> None:
        self._files: dict[str, StoredFile] = {}
        self._lock = threading.Lock()

    def add(self, filename: str, purpose: str, data: bytes) -> StoredFile:
        """Keep `data` as a new file and return it."""
        stored = StoredFile(new_id("file-"), filename, purpose, data, int(time.time()))
        with self._lock:
            self._files[stored.id] = stored
        return stored

    def get(self, file_id: str) -> StoredFile | None:
        """The file `file_id`, if it is kept."""
        return self._files.get(file_id)

    def clear(self) -> None:
        """Forget every file."""
        with self._lock:
            self._files.clear()

    def handle(self, call: Call, parts: list[str]) -> Reply:
        """Answer a call under `/v1/files`; `parts` is the path after it, split on "/"."""
        if not parts:
            if call.method == "POST":
                return self._upload(call)
            return self._list(call)
        stored = self._files.get(parts[0])
        if stored is None:
            return not_found(f"No such File object: {parts[0]}", "id")
        if len(parts) == 2:
            return Reply(200, stored.data, b"application/octet-stream")
        if call.method == "DELETE":
            with self._lock:
                self._files.pop(stored.id, None)
            return ok({"id": stored.id, "object": "file", "deleted": True})
        return ok(stored.document())

    def _upload(self, call: Call) -> Reply:
        content_type = call.headers.get("content-type", "")
        fields = _multipart(call.body, content_type)
        if fields is None:
            return invalid("The upload must be multipart/form-data with a boundary.", None)
        if "file" not in fields:
            return invalid(
                "Missing required parameter: 'file'.", "file", "missing_required_parameter"
            )
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if not purpose:
            message = "Missing required parameter: 'purpose'."
            return invalid(message, "purpose", "missing_required_parameter")
        if purpose not in PURPOSES:
            message = f"Invalid value for 'purpose': {purpose!r}; one of {sorted(PURPOSES)}."
            return invalid(message, "purpose", "invalid_value")
        filename, data = fields["file"]
        return ok(self.add(filename or "file", purpose, data).document())

    def _list(self, call: Call) -> Reply:
        purpose = call.query.get("purpose")
        with self._lock:
            files = [f for f in self._files.values() if purpose is None or f.purpose == purpose]
        if call.query.get("order", "desc") == "desc":
            files.reverse()
        return listing(call, [f.document() for f in files], default_limit=10_000, cap=10_000)


def _multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]] | None:
    """The fields of a multipart/form-data body: name -> (filename, content); None if it is not
    one."""
    kind, _, rest = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        return None
    boundary = _params(";" + rest).get("boundary")
    if not boundary:
        return None
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(b"--" + boundary.encode("latin-1"))[1:]:
        if part.startswith(b"--"):
            break  # the closing delimiter
        head, _, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        disposition = ""
        for header in head.decode("utf-8", "replace").split("\r\n"):
            name, _, value = header.partition(":")
            if name.strip().lower() == "content-disposition":
                disposition = value
        params = _params(disposition.partition(";")[1] + disposition.partition(";")[2])
        if "name" in params:
            fields[params["name"]] = (params.get("filename"), content.removesuffix(b"\r\n"))
    return fields


def _params(text: str) -> dict[str, str]:
    """The `; key=value` parameters of a header (quoted values unquoted)."""
    found: dict[str, str] = {}
    for match in _PARAM.finditer(text):
        quoted, bare = match.group(2), match.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        found[match.group(1).lower()] = value
    return found
