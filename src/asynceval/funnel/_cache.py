"""The model-call cache on the call path: looked up before the funnel, filled after a success.

A request's entry is told apart by the repetition it is made in (task_id, repeat_idx) and by how
many identical requests that repetition made before it: repetitions and repeated samples (five
draws of one prompt at temperature 1) each keep their own answer, and a second run of the same
tasks meets each one again in the same place. Outside a repetition, identical requests share one
entry. Credentials in the URL's query string (`key=`, `api_key=` ...) are not part of the key.

A hit takes no slot and sends nothing: it counts as an LLM call of the repetition (with the
tokens the stored answer reports, so a cached run's reports read like the first run's) plus a
`cache_hits`, and writes a `cache_hit` event instead of queueing/acquired/released. A store that
the disk refuses never fails the call: the first is a `cache_store_failed` warning, the rest are
counted on the cache (`CallCache.store_failures`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable

from .. import events
from ..runtime import CachedAnswer, CallCache
from ._call import call_id, caller
from ._usage import Usage, current_usage

_CREDENTIALS = frozenset({"key", "api_key", "api-key", "apikey", "access_token", "token"})


class CacheUse:
    """One request's place in `cache`: its key, its lookup, its store."""

    __slots__ = ("cache", "key", "method", "url")

    def __init__(
        self,
        cache: CallCache,
        method: str,
        url: str,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.cache = cache
        self.method = method
        base, _, query = url.partition("?")
        self.url = base  # stored and shown without its query string
        if query:
            kept = [
                (name, value)
                for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True)
                if name.lower() not in _CREDENTIALS
            ]
            url = f"{base}?{urllib.parse.urlencode(kept)}" if kept else base
        request = cache.key(method, url, body, headers)
        occurrence = 0
        counter = current_usage()
        if counter is not None:  # a repetition: its n-th request of this kind
            occurrence = counter.requests_seen.get(request, 0)
            counter.requests_seen[request] = occurrence + 1
        scope = (events.context_value("task_id"), events.context_value("repeat_idx"), occurrence)
        self.key = cache.scoped(request, scope)

    async def lookup(self) -> CachedAnswer | None:
        return await self.cache.load(self.key, self.method, self.url)

    def hit(
        self, usage: Usage | None, *, agent: str | None = None, dimension: str | None = None
    ) -> None:
        """Count a call answered from the cache (reporting `usage`) and write its event."""
        counter = current_usage()
        if counter is not None:
            counter.llm_calls += 1
            counter.cache_hits += 1
            if usage is not None:
                counter.add_tokens(usage)
        agent, dimension = caller(agent, dimension)
        events.cache_hit(
            agent=agent,
            dimension=dimension,
            call_id=call_id(),
            url=self.url,
            key=self.key[:16],
        )

    async def store(self, answer: CachedAnswer) -> None:
        """Keep a successful answer; a refusal of the disk is counted, never raised."""
        try:
            await self.cache.store(self.key, self.method, self.url, answer)
        except OSError as exc:
            self.cache.store_failures += 1
            if self.cache.store_failures == 1:
                events.cache_store_failed(
                    directory=str(self.cache.directory), error=f"{type(exc).__name__}: {exc}"
                )
