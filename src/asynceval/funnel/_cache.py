"""The call journal and the model-call cache on the call path: looked up before the funnel (the
journal first), filled after a success.

A request's key is told apart by the repetition it is made in (task_id, repeat_idx) and by how
many identical requests that repetition made before it: repetitions and repeated samples (five
draws of one prompt at temperature 1) each keep their own answer, and a second run of the same
tasks (or a resumed one) meets each one again in the same place. Outside a repetition, identical
requests share one entry. Credentials in the URL's query string (`key=`, `api_key=` ...) are not
part of the key as they are: a SHA-256 of them is, like the API key headers' (see
`asynceval.runtime.cache`).

A hit takes no slot and sends nothing: it counts as an LLM call of the repetition (with the
tokens the stored answer reports, so a cached run's reports read like the first run's) plus a
`cache_hits` (or `journal_hits`), and writes a `cache_hit` (or `journal_hit`) event instead of
queueing/acquired/released. A store that the disk refuses never fails the call: the first is a
`cache_store_failed` warning, the rest are counted on the cache (`CallCache.store_failures`) or
the journal (`CallJournal.store_failures`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import urllib.parse
from collections.abc import Iterable
from contextvars import ContextVar

from .. import events
from ..runtime import CachedAnswer, CallCache
from ._call import call_id, caller
from ._journal import CallJournal
from ._usage import Usage, current_usage

_pending: ContextVar[CacheUse | None] = ContextVar("asynceval_cache_use", default=None)


def take_cache_use() -> CacheUse | None:
    """The `CacheUse` of the call this code makes now (made just before it, in this context, and
    not answered from the store), taken once: the batch lane journals a line by its key."""
    use = _pending.get()
    if use is not None:
        _pending.set(None)
    return use


_CREDENTIALS = frozenset({"key", "api_key", "api-key", "apikey", "access_token", "token"})


@functools.lru_cache(maxsize=1024)
def request_head(method: str, url: str, headers: tuple[tuple[str, str], ...]) -> tuple[str, bytes]:
    """The URL an entry of a request is stored and shown with (without its query string), and
    what its key hashes before the body (`CallCache.key_head`, credentials in the query string
    hashed): the same for every call of a route, so worked out once."""
    base, _, query = url.partition("?")
    if query:
        kept = []
        for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
            if name.lower() in _CREDENTIALS:  # who asks scopes the answer: hashed
                value = "sha256:" + hashlib.sha256(value.encode()).hexdigest()
            kept.append((name, value))
        url = f"{base}?{urllib.parse.urlencode(kept)}"
    return base, CallCache.key_head(method, url, headers)


class CacheUse:
    """One request's place in the journal and the cache: its key, its lookup, its store."""

    __slots__ = ("cache", "journal", "key", "method", "raw_key", "source", "url")

    def __init__(
        self,
        cache: CallCache | None,
        method: str,
        url: str,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
        journal: CallJournal | None = None,
    ) -> None:
        self.cache = cache
        self.journal = journal
        self.method = method
        self.source: str | None = None  # where the answer came from: "journal", "cache"
        self.url, head = request_head(method, url, tuple(headers))
        request = CallCache.key_of(head, body)
        occurrence = 0
        counter = current_usage()
        if counter is not None:  # a repetition: its n-th request of this kind
            seen = counter.requests_seen
            occurrence = seen.get(request, 0)
            seen[request] = occurrence + 1
        scope = (events.context_value("task_id"), events.context_value("repeat_idx"), occurrence)
        self.key = CallCache.scoped(request, scope)
        self.raw_key = bytes.fromhex(self.key)
        _pending.set(self)  # for the batch lane (`take_cache_use`), unless it is a hit

    async def lookup(self) -> CachedAnswer | None:
        """The journal's answer from an earlier segment, else the cache's, else None."""
        journal = self.journal
        if journal is not None:
            key = self.raw_key
            if journal.may_replay(key):
                answer = await journal.load(key, self.url)
                if answer is not None:
                    self.source = "journal"
                    return answer
        if self.cache is not None:
            answer = await self.cache.load(self.key, self.method, self.url)
            if answer is not None:
                self.source = "cache"
                return answer
        return None

    def hit(
        self,
        usage: Usage | None,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        answer: CachedAnswer | None = None,
    ) -> None:
        """Count a call answered from the journal or the cache (reporting `usage`) and write its
        event; a cache hit's `answer` goes to the journal too."""
        replayed = self.source == "journal"
        if _pending.get() is self:
            _pending.set(None)
        counter = current_usage()
        if counter is not None:
            counter.llm_calls += 1
            if replayed:
                counter.journal_hits += 1
            else:
                counter.cache_hits += 1
            if usage is not None:
                counter.add_tokens(usage)
        agent, dimension = caller(agent, dimension)
        fields = {"url": self.url, "key": self.key[:16]}
        if replayed:
            assert self.journal is not None
            self.journal.hits += 1
            events.journal_hit(agent=agent, dimension=dimension, call_id=call_id(), **fields)
            return
        events.cache_hit(agent=agent, dimension=dimension, call_id=call_id(), **fields)
        if self.journal is not None and answer is not None:
            self.journal.keep(self.raw_key, self.url, answer, wait=False)

    async def store(self, answer: CachedAnswer) -> None:
        """Keep a successful answer in the journal and the cache (both written at once, and
        awaited, the journal's if it is `durable`); a refusal of the disk is counted, never
        raised."""
        journal = self.journal
        kept = None
        if journal is not None:  # a future only if the journal is durable
            kept = journal.keep(self.raw_key, self.url, answer)
        cache = self.cache
        if cache is not None:
            try:
                await cache.store(self.key, self.method, self.url, answer)
            except OSError as exc:
                cache.store_failures += 1
                if cache.store_failures == 1:
                    events.cache_store_failed(
                        directory=str(cache.directory), error=f"{type(exc).__name__}: {exc}"
                    )
        if kept is not None:
            with contextlib.suppress(OSError):  # counted by the journal
                await kept
