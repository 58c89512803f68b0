"""BatchLane: a runtime's batch lane (LLM_LANE=batch, `lane="batch"`; DESIGN section 16).

A route whose lane is `batch` holds its runtime's `BatchLane` (`Route.batches`). Its calls that
a batch API serves (a non-streamed POST to `.../chat/completions` or `.../messages`) do not go
live: `post` and `send` hand them to the `Batcher` of their event loop, batch endpoint (the
provider's batch API at the route's API base), credentials (the headers that say who asks) and
run (the batch journal beside the run's call journal), made on first use; everything else goes
live as ever. One lane per runtime, found with `BatchLane.of(runtime)`.

`keep_batches`: when the calls waiting on an open batch have all gone (a run cancelled: Ctrl-C),
the batch stays open at the provider for a resumed run to collect (default: it is cancelled).
`aclose()` waits for this event loop's batchers to finish their work (a run's end, before its
loop ends: open batches whose calls have gone are cancelled then, unless kept).

`relay`: set on a runtime that runs part of someone else's run (a Dask worker's), its lines go
to the run's owner, into the owner's batches (`asynceval.funnel._batch_relay`), instead of
batches of its own.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._batch_call import batch_headers, post_in_batches, send_in_batches
from ._batch_journal import NO_BATCH_JOURNAL, BatchJournal, FileBatchJournal, batch_journal_path
from ._batch_relay import BatchRelay, RelayedBatcher
from ._batch_wire import BatchWire, wire_for
from ._batcher import Batcher
from ._cache import take_cache_use
from ._journal import current_journal

if TYPE_CHECKING:
    import httpx

    from ..config import Settings
    from ..limits import ConcurrencyController
    from ..runtime import Runtime
    from ._replies import Reply
    from ._route import Route, UsageOf

T = TypeVar("T")

_lanes: weakref.WeakKeyDictionary[Runtime, BatchLane] = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


class BatchLane:
    """A runtime's batch lane (see the module)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.keep_batches = False
        """Leave a batch open at the provider when its calls have gone (see the module)."""
        self.submitting = 0  # batch creations waiting for a slot or holding one
        self.relay: BatchRelay | None = None
        """Where its lines go instead of its own batches (see the module)."""
        self._batchers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[Any, ...], Batcher]
        ] = weakref.WeakKeyDictionary()
        self._journals: dict[tuple[Path, str], FileBatchJournal] = {}
        self._wires: dict[tuple[str, str], BatchWire | None] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, runtime: Runtime) -> BatchLane:
        """`runtime`'s batch lane, made on first use (kept as long as the runtime)."""
        lane = _lanes.get(runtime)
        if lane is None:
            with _lanes_lock:
                lane = _lanes.get(runtime)
                if lane is None:
                    lane = _lanes[runtime] = cls(runtime.settings)
        return lane

    def idle(self, controller: ConcurrencyController) -> bool:
        """Whether no call of the runtime is in flight or waiting for a slot on `controller`,
        other than the lane's own batch creations."""
        stats = controller.statistics()
        return stats.active + stats.waiting <= self.submitting

    def wire(self, endpoint: str, path: str) -> BatchWire | None:
        """The batch API serving a POST to `path` under the API base `endpoint`, if any."""
        key = (endpoint, path)
        try:
            return self._wires[key]
        except KeyError:
            found = self._wires[key] = wire_for(endpoint, path)
            return found

    def batcher(
        self, route: Route, wire: BatchWire, headers: Mapping[str, str]
    ) -> Batcher | RelayedBatcher:
        """This event loop's batcher for `wire` under these credentials and the current run's
        journal (made on first use, with `route`'s pool, gateway and simulator); with a relay,
        one that sends the lines to the run's owner."""
        if self.relay is not None:
            max_attempts = route.gateway.retry_policy.max_attempts
            return RelayedBatcher(self.relay, wire, dict(headers), max_attempts)
        return self.own_batcher(route, wire, headers)

    def own_batcher(self, route: Route, wire: BatchWire, headers: Mapping[str, str]) -> Batcher:
        """This event loop's batcher of this process (see `batcher`)."""
        journal = self.journal()
        loop = asyncio.get_running_loop()
        # Not keyed by the route's transport: callers of one endpoint share its batches
        # whatever client they came with (an embedded simulator of their own apart).
        served = route.key.transport if route.key.transport.startswith("sim:") else ""
        controller = id(route.gateway.controller)
        key = (
            wire.provider,
            wire.base,
            served,
            controller,
            tuple(sorted(headers.items())),
            journal,
        )
        batchers = self._batchers.get(loop)
        if batchers is None:
            with self._lock:
                batchers = self._batchers.setdefault(loop, {})
        batcher = batchers.get(key)
        if batcher is None:
            batcher = batchers[key] = Batcher(self, wire, route, dict(headers), journal)
        return batcher

    def journal(self) -> BatchJournal:
        """The batch journal of the run this code runs in: beside its call journal, if any."""
        calls = current_journal()
        if calls is None:
            return NO_BATCH_JOURNAL
        path = batch_journal_path(calls)
        key = (path, calls.segment)  # a resumed segment reads what the earlier ones left open
        with self._lock:
            journal = self._journals.get(key)
            if journal is None:
                journal = self._journals[key] = FileBatchJournal(path)
        return journal

    def batchers(self) -> list[Batcher]:
        """This event loop's batchers."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return []
        return list(self._batchers.get(loop, {}).values())

    async def aclose(self) -> None:
        """Wait until this event loop's batchers have nothing queued or open (see the
        module)."""
        for batcher in self.batchers():
            await batcher.wait_stopped()

    def post(
        self,
        route: Route,
        url: str,
        headers: Mapping[str, str],
        content: bytes,
        body: Mapping[str, Any],
        read: Callable[[Reply], T],
        usage_of: UsageOf[T],
        agent: str | None,
        dimension: str | None,
    ) -> Awaitable[T] | None:
        """A model's call in the batch lane (what to await), or None: it goes live (no batch
        API serves its URL, or it streams)."""
        import httpx

        use = take_cache_use()  # its place in the call journal, taken whatever goes on
        endpoint = route.gateway.endpoint
        if endpoint is None or body.get("stream"):
            return None
        wire = self.wire(endpoint, httpx.URL(url).path)
        if wire is None:
            return None
        batcher = self.batcher(route, wire, batch_headers(headers.items()))
        return post_in_batches(batcher, route, url, content, body, read, agent, dimension, use)

    def send(
        self, route: Route, request: httpx.Request, agent: str | None
    ) -> Awaitable[Any] | None:
        """A transport's request in the batch lane (what to await for its `httpx.Response`), or
        None: it goes live (not an inference POST a batch API serves, or it streams)."""
        import json

        use = take_cache_use()  # its place in the call journal, taken whatever goes on
        endpoint = route.gateway.endpoint
        if request.method != "POST" or endpoint is None:
            return None
        if "json" not in request.headers.get("content-type", "application/json"):
            return None
        wire = self.wire(endpoint, request.url.path)
        if wire is None:
            return None
        try:
            body = json.loads(request.content)
        except ValueError:
            return None
        if not isinstance(body, dict) or body.get("stream") or body.get("background"):
            return None
        batcher = self.batcher(route, wire, batch_headers(request.headers.multi_items()))
        return send_in_batches(batcher, route, request, body, agent, use)

    def __repr__(self) -> str:
        return f"BatchLane(keep_batches={self.keep_batches}, batchers={len(self.batchers())})"


def batch_lane(runtime: Runtime, lane: str) -> BatchLane | None:
    """`runtime`'s batch lane for a route whose lane is `lane` (None unless it is `batch`)."""
    return BatchLane.of(runtime) if lane == "batch" else None
