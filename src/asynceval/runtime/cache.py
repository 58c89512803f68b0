"""CallCache: successful LLM answers on disk, keyed by what the funnel sends.

The key is a SHA-256 of the request as sent: method, full URL (so two base URLs never share an
entry), the body's bytes, and the few headers that change what a provider answers
(`anthropic-version`, `anthropic-beta`, `openai-beta`). Never the API key: authorization headers
are not part of the key and nothing of the request but its URL is stored.

An entry is one file, `DIR/ab/abcdef...` (the key's first two hex digits name its folder): a
JSON line (format version, method, URL, status, content type, when stored) then the body's
bytes as received. Written to a temporary file in the same folder and renamed over the entry,
so a reader never sees half an entry and concurrent writers (threads, processes, machines on one
shared folder) of one key leave one whole entry (the last). An entry that cannot be read or
does not match the request (damaged, another format, a hash collision) is a miss.

File access runs on the cache's own few threads, never on the event loop and never on anyio's
default thread pool (sync code calling `generate_sync` from `anyio.to_thread` may fill that pool
while waiting for the very answers the cache would give); a caller cancelled while the disk is slow
leaves at once (the thread finishes alone; a store cleans up after itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

FORMAT = 1
_THREADS = 4  # file reads and renames: a few threads keep up with thousands of calls a second
KEY_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
"""Request headers that are part of the key: they change what the provider answers."""


class CachedAnswer(NamedTuple):
    """A stored answer: status, content type and body, as the provider sent them."""

    status_code: int
    content_type: str
    content: bytes

    @property
    def headers(self) -> Mapping[str, str]:
        return {"content-type": self.content_type}


class CallCache:
    """Answers of successful calls stored under `directory` (created on the first store)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser()
        self.store_failures = 0  # stores the disk refused (the first one is a warning event)

    def __repr__(self) -> str:
        return f"CallCache({str(self.directory)!r})"

    @staticmethod
    def key(
        method: str,
        url: str,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
    ) -> str:
        """The entry name of a request (hex SHA-256); `headers` may hold any headers: only
        `KEY_HEADERS` count, whatever their case."""
        kept = sorted(
            (name.lower(), value) for name, value in headers if name.lower() in KEY_HEADERS
        )
        head = json.dumps([FORMAT, method.upper(), url, kept], separators=(",", ":"))
        digest = hashlib.sha256(head.encode("utf-8"))
        digest.update(b"\n")
        digest.update(body)
        return digest.hexdigest()

    @staticmethod
    def scoped(key: str, scope: Sequence[Any]) -> str:
        """`key` told apart by `scope` (JSON values): requests that are the same but must not
        share an answer (a repetition's, its n-th of the kind); the body is not hashed again."""
        return hashlib.sha256(f"{key}\n{json.dumps(list(scope))}".encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / key

    async def load(self, key: str, method: str, url: str) -> CachedAnswer | None:
        """The answer stored for `key` if there is a readable one for this method and URL."""
        result: CachedAnswer | None = await _run(self._load, key, method, url)
        return result

    async def store(self, key: str, method: str, url: str, answer: CachedAnswer) -> None:
        """Store `answer` for `key` (replacing any entry); raises OSError if the disk refuses."""
        await _run(self._store, key, method, url, answer)

    def _load(self, key: str, method: str, url: str) -> CachedAnswer | None:
        try:
            with open(self.path(key), "rb") as file:
                head = json.loads(file.readline())
                content = file.read()
        except (OSError, ValueError):
            return None  # none stored, or damaged: a miss (a later store replaces it)
        if not (
            isinstance(head, dict)
            and head.get("format") == FORMAT
            and head.get("method") == method.upper()
            and head.get("url") == url
            and isinstance(head.get("status"), int)
            and isinstance(head.get("content_type"), str)
        ):
            return None
        return CachedAnswer(head["status"], head["content_type"], content)

    def _store(self, key: str, method: str, url: str, answer: CachedAnswer) -> None:
        folder = self.path(key).parent
        folder.mkdir(parents=True, exist_ok=True)
        head: dict[str, Any] = {
            "format": FORMAT,
            "method": method.upper(),
            "url": url,
            "status": answer.status_code,
            "content_type": answer.content_type,
            "stored_at": round(time.time(), 3),
        }
        descriptor, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
        try:
            os.fchmod(descriptor, 0o644)  # not mkstemp's 0600: a folder shared between users
            with os.fdopen(descriptor, "wb") as file:
                file.write(json.dumps(head).encode("utf-8") + b"\n")
                file.write(answer.content)
            os.replace(temporary, self.path(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


# One small pool for every cache of the process (made on first use, renewed in a forked child,
# whose copy of the parent's threads does not run).
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _run(function: Any, *args: Any) -> asyncio.Future[Any]:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_THREADS, thread_name_prefix="asynceval-cache")
        return asyncio.wrap_future(_executor.submit(function, *args))


def _forget_executor() -> None:
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_executor)
