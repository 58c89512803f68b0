"""CallCache: successful LLM answers on disk, keyed by what the funnel sends and who sends it.

The key is a SHA-256 of the request as sent: method, full URL (so two base URLs never share an
entry), the body's bytes, and the headers that scope an answer (`key_headers`): API versions
(`anthropic-version`, `anthropic-beta`, `openai-beta`), the credentials (`Authorization`,
`x-api-key`, `api-key`: a SHA-256 of each, so two API keys, perhaps of two organisations, never
share an answer), `OpenAI-Organization`, `OpenAI-Project`, and every custom default header a
client adds. Left out are the headers of the transport and those an SDK changes from one
request to the next without changing the answer (`NOT_KEY_HEADERS`, `NOT_KEY_PREFIXES`:
content length, encodings, user agent, `x-stainless-*` retry counts and timeouts, idempotency
keys, trace ids, cookies). Nothing of the request but its URL (without credentials) is stored.

The entries live in one SQLite file, `DIR/cache.sqlite` (`asynceval.runtime._store.Store`:
WAL, one transaction per group of writes, verified reads, LLM_CACHE_MAX_BYTES with
least-recently-used eviction). An entry that cannot be read, fails its length or digest, or
answers another URL is a miss, and the next store replaces it. A folder of the format before
(one file per entry, `DIR/ab/abcdef...`) is not read: those entries were keyed without the
credentials, so none can be told to belong to the caller; `asynceval cache stats` counts them and
`asynceval cache prune --all` deletes them.

File access runs on the store's own few threads, never on the event loop and never on anyio's
default thread pool (sync code calling `generate_sync` from `anyio.to_thread` may fill that pool
while waiting for the very answers the cache would give); a caller cancelled while the disk is slow
leaves at once (the write it queued is still made).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import json.encoder
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ._store import Stats, Store, submit

FORMAT = 2
FILE_NAME = "cache.sqlite"
KEY_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
"""Request headers that change what the provider answers: in the key as they are."""
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization")
"""Request headers that say who asks: in the key as a SHA-256 of their value."""
NOT_KEY_HEADERS = frozenset(
    {
        # the transport's
        "accept", "accept-encoding", "connection", "content-encoding", "content-length",
        "content-type", "cookie", "date", "expect", "host", "keep-alive", "te",
        "transfer-encoding", "upgrade", "user-agent",
        # per request, never a change of the answer
        "idempotency-key", "x-request-id", "x-client-request-id", "request-id",
        "traceparent", "tracestate", "baggage", "sentry-trace", "x-amzn-trace-id", "b3",
        "x-retry-count", "retry-count", "x-timeout", "x-goog-api-client",
    }
)  # fmt: skip
"""Request headers never in the key: the transport's, and those that vary by request."""
NOT_KEY_PREFIXES = ("x-stainless-", "x-b3-", "x-datadog-")
"""Prefixes of headers never in the key (the OpenAI and Anthropic SDKs' `x-stainless-*`: their
platform, retry count, read timeout; tracing)."""
_OLD_ENTRY = re.compile(r"^[0-9a-f]{64}$|^\..*\.tmp$")


class CachedAnswer(NamedTuple):
    """A stored answer: status, content type and body, as the provider sent them."""

    status_code: int
    content_type: str
    content: bytes

    @property
    def headers(self) -> Mapping[str, str]:
        return {"content-type": self.content_type}


def _json_list(values: Sequence[Any]) -> str:
    """`json.dumps(list(values))`, without its encoder for the strings, ints and None a scope
    holds."""
    parts = []
    for value in values:
        kind = type(value)
        if kind is str:
            parts.append(_json_string(value))
        elif kind is int:
            parts.append(int.__repr__(value))
        elif value is None:
            parts.append("null")
        else:
            return json.dumps(list(values))
    return f"[{', '.join(parts)}]"


_json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii  # json.dumps's own


def key_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers of a request that are part of its key (see the module), sorted, credentials
    hashed."""
    kept = []
    for name, value in headers:
        name = name.lower()
        if name in NOT_KEY_HEADERS or name.startswith(NOT_KEY_PREFIXES):
            continue
        if name in CREDENTIAL_HEADERS:
            value = "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()
        kept.append((name, value))
    kept.sort()
    return kept


class CallCache:
    """Answers of successful calls stored under `directory` (created on the first store), taking
    at most `max_bytes` on disk (LLM_CACHE_MAX_BYTES; None: no bound; see
    `asynceval.runtime._store_sql` for how it is kept)."""

    def __init__(self, directory: str | os.PathLike[str], *, max_bytes: int | None = None) -> None:
        self.directory = Path(directory).expanduser()
        self.max_bytes = max_bytes
        self.store_failures = 0  # stores the disk refused (the first one is a warning event)
        self.db = Store(self.directory / FILE_NAME, max_bytes=max_bytes)

    def __repr__(self) -> str:
        return f"CallCache({str(self.directory)!r})"

    @staticmethod
    def key(
        method: str,
        url: str,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
    ) -> str:
        """The entry name of a request (hex SHA-256); `headers` may hold any headers: those of
        `key_headers` count, whatever their case."""
        return CallCache.key_of(CallCache.key_head(method, url, headers), body)

    @staticmethod
    def key_head(method: str, url: str, headers: Iterable[tuple[str, str]] = ()) -> bytes:
        """What a request's key hashes before its body: the same for every request of one
        method, URL and headers (a caller may keep it: `key_of(head, body)` is `key`)."""
        head = json.dumps(
            [FORMAT, method.upper(), url, key_headers(headers)], separators=(",", ":")
        )
        return head.encode("utf-8") + b"\n"

    @staticmethod
    def key_of(head: bytes, body: bytes) -> str:
        """`key` of a request whose `key_head` is `head`."""
        digest = hashlib.sha256(head)
        digest.update(body)
        return digest.hexdigest()

    @staticmethod
    def scoped(key: str, scope: Sequence[Any]) -> str:
        """`key` told apart by `scope` (JSON values): requests that are the same but must not
        share an answer (a repetition's, its n-th of the kind); the body is not hashed again."""
        return hashlib.sha256(f"{key}\n{_json_list(scope)}".encode()).hexdigest()

    async def load(self, key: str, method: str, url: str) -> CachedAnswer | None:
        """The answer stored for `key` if there is a whole one for this URL."""
        entry = await asyncio.wrap_future(submit(self.db.get, bytes.fromhex(key), url))
        if entry is None:
            return None
        return CachedAnswer(entry.status_code, entry.content_type, entry.content)

    async def store(self, key: str, method: str, url: str, answer: CachedAnswer) -> None:
        """Store `answer` for `key` (replacing any entry); raises OSError if the disk refuses."""
        await self.db.put_async(
            bytes.fromhex(key), url, answer.status_code, answer.content_type, answer.content
        )

    def check(self) -> None:
        """Raise OSError with a one-line message unless the cache can be written now (its folder
        and file made, one transaction committed): call it before the first repetition."""
        self.db.check()

    def stats(self) -> Stats:
        """What the cache holds (see `Stats`)."""
        return self.db.stats()

    def prune(
        self,
        *,
        max_bytes: int | None = None,
        older_than_s: float | None = None,
        everything: bool = False,
    ) -> tuple[int, int]:
        """Delete entries (`Store.prune`); `everything` also deletes the entries of the format
        before. Returns (entries, bytes) deleted."""
        removed, freed = self.db.prune(
            max_bytes=max_bytes, older_than_s=older_than_s, everything=everything
        )
        if everything:
            for path in self.old_entries():
                try:
                    size = path.stat().st_size
                    path.unlink()
                except OSError:
                    continue
                removed, freed = removed + 1, freed + size
                if path.parent != self.directory:
                    with contextlib.suppress(OSError):
                        path.parent.rmdir()  # once empty
        return removed, freed

    def old_entries(self) -> list[Path]:
        """The files of the one-file-per-entry format before (`DIR/ab/abcdef...` and their
        temporary files), which this cache does not read."""
        found: list[Path] = []
        try:
            folders = [p for p in self.directory.iterdir() if re.fullmatch("[0-9a-f]{2}", p.name)]
        except OSError:
            return found
        for folder in folders:
            try:
                found.extend(
                    p for p in folder.iterdir() if _OLD_ENTRY.match(p.name) and p.is_file()
                )
            except OSError:
                continue
        return found

    def close(self) -> None:
        """Write the uses noted in memory and close the file (a later use opens it again)."""
        self.db.close()
