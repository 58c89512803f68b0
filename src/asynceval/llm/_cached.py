"""The model-call cache on the call path: looked up before the funnel, filled after a success.

A hit takes no slot and sends nothing: it counts as an LLM call of the repetition (with the
tokens the stored answer reports, so a cached run's reports read like the first run's) plus a
`cache_hits`, and writes a `cache_hit` event instead of queueing/acquired/released. A store that
the disk refuses is a `cache_store_failed` warning, never the call's failure.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import events
from ..runtime import CachedAnswer, CallCache
from .gateway import _call_id
from .types import Usage
from .usage import current_usage


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
        self.key = cache.key(method, url, body, headers)
        # Stored and shown without its query string, which may carry a key (?key=...); the
        # whole URL is in the hash, so entries of different queries still never mix.
        self.url = url.split("?", 1)[0]

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
                counter.prompt_tokens += usage.prompt_tokens
                counter.completion_tokens += usage.completion_tokens
        events.cache_hit(
            agent=agent if agent is not None else events.context_value("agent"),
            dimension=dimension if dimension is not None else events.context_value("dimension"),
            call_id=_call_id(),
            url=self.url,
            key=self.key[:16],
        )

    async def store(self, answer: CachedAnswer) -> None:
        """Keep a successful answer; a refusal of the disk is an event, not an error."""
        try:
            await self.cache.store(self.key, self.method, self.url, answer)
        except OSError as exc:
            events.cache_store_failed(
                directory=str(self.cache.directory), error=f"{type(exc).__name__}: {exc}"
            )
