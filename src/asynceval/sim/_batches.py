"""The provider batch APIs' routes: OpenAI's Files (`/v1/files`) and Batch (`/v1/batches`) APIs
and Anthropic's Message Batches API (`/v1/messages/batches`), all in memory.

A wrong method answers 405 with an `allow` header, an unknown path 404, in the API's own error
format. Every answer is computed at once (no latency, no caps, no live faults): a batch's own
delay and faults are `SimConfig.batch_*`.
"""

from __future__ import annotations

import json

from asynceval.sim._anthropic import ANTHROPIC
from asynceval.sim._asgi import Call, Reply
from asynceval.sim._batch_anthropic import AnthropicBatches
from asynceval.sim._batch_lines import BatchLines
from asynceval.sim._batch_openai import OpenAIBatches
from asynceval.sim._config import SimConfig
from asynceval.sim._files import FileStore
from asynceval.sim._openai_errors import error
from asynceval.sim._stats import Stats

_PREFIXES = ("/v1/files", "/v1/batches", "/v1/messages/batches")

# (prefix, number of path segments after it, last segment or None) -> the methods allowed.
_METHODS: dict[tuple[str, int, str | None], tuple[str, ...]] = {
    ("/v1/files", 0, None): ("GET", "POST"),
    ("/v1/files", 1, None): ("DELETE", "GET"),
    ("/v1/files", 2, "content"): ("GET",),
    ("/v1/batches", 0, None): ("GET", "POST"),
    ("/v1/batches", 1, None): ("GET",),
    ("/v1/batches", 2, "cancel"): ("POST",),
    ("/v1/messages/batches", 0, None): ("GET", "POST"),
    ("/v1/messages/batches", 1, None): ("DELETE", "GET"),
    ("/v1/messages/batches", 2, "results"): ("GET",),
    ("/v1/messages/batches", 2, "cancel"): ("POST",),
}


class BatchRoutes:
    """The files and batches of one provider, and the routes that reach them."""

    __slots__ = ("anthropic", "files", "lines", "openai")

    def __init__(self, config: SimConfig, stats: Stats) -> None:
        self.lines = BatchLines(config)
        self.files = FileStore()
        self.openai = OpenAIBatches(self.lines, self.files, stats.batches["openai"])
        self.anthropic = AnthropicBatches(self.lines, stats.batches["anthropic"])

    @staticmethod
    def serves(path: str) -> bool:
        """Whether `path` (no trailing slash) is one of these routes' (or under one)."""
        return any(_under(path, prefix) for prefix in _PREFIXES)

    def handle(self, call: Call) -> Reply:
        """Answer one call to a path `serves` said yes to."""
        prefix = max((p for p in _PREFIXES if _under(call.path, p)), key=len)
        parts = call.path[len(prefix) :].strip("/").split("/") if call.path != prefix else []
        last = parts[1] if len(parts) == 2 else None
        allowed = _METHODS.get((prefix, len(parts), last))
        anthropic = prefix == "/v1/messages/batches"
        if allowed is None or any(not part for part in parts):
            return _fail(anthropic, 404, f"No route for {call.method} {call.path}")
        if call.method not in allowed:
            reply = _fail(anthropic, 405, f"Method {call.method} not allowed")
            return reply._replace(headers=((b"allow", ", ".join(allowed).encode()),))
        if anthropic:
            return self.anthropic.handle(call, parts)
        if prefix == "/v1/files":
            return self.files.handle(call, parts)
        return self.openai.handle(call, parts)

    def clear(self) -> None:
        """Forget every file, batch and batch attempt index."""
        self.files.clear()
        self.openai.clear()
        self.anthropic.clear()
        self.lines.clear()


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def _fail(anthropic: bool, status: int, message: str) -> Reply:
    if anthropic:
        return Reply(status, json.dumps(ANTHROPIC.error(status, message, None)).encode())
    return error(status, message, None, "not_found" if status == 404 else "method_not_allowed")
