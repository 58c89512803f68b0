"""A streamed answer that holds its call's slot until it is read to the end or closed.

The stream is the provider's, decoded; what the send read ahead (`asynceval.funnel._readahead`)
comes first, unchanged (but for the usage-only chunk of a chat completion stream whose caller
did not ask for it: `hide`). Reading it feeds the usage scanner, and LLM_STREAM_IDLE_TIMEOUT bounds
each wait for the next chunk (a stall fails as `httpx.ReadTimeout`, with a `stream_stalled`
event; the slot is free before the error reaches the reader). Its end, its close, an error, a
cancelled read, or, for a stream the consumer dropped without closing, the garbage collector,
releases the lease exactly once: the slot is freed and the tokens the stream reported are
counted. A stream its scope reclaimed (`asynceval.funnel._held`) ends for its reader with
`httpx.ReadError`.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx

from .. import events
from ..runtime import from_thread, spawn
from ._lease import Lease
from ._readahead import Ahead
from ._usage import StreamUsage
from ._usage_chunk import UsageChunkFilter


class _Holder:
    """What a stream must give back once: its lease and its place in the loop's pool."""

    __slots__ = ("done", "finalizer", "lease", "leave")

    def __init__(self, lease: Lease, leave: Callable[[], None]) -> None:
        self.lease = lease
        self.leave = leave
        self.done = False
        self.finalizer: weakref.finalize[Any, Any] | None = None

    def finish(self, usage: StreamUsage | None) -> None:
        if self.done:
            return
        self.done = True
        if self.finalizer is not None:
            self.finalizer.detach()  # nothing left for the collector to do
        try:
            self.lease.release(usage.usage() if usage is not None else None)
        finally:
            self.leave()


def _finish_later(
    holder: _Holder,
    loop: asyncio.AbstractEventLoop,
    usage: StreamUsage,
    then: Callable[[], object] | None = None,
) -> None:
    """For a stream the garbage collector found unclosed, or reclaimed by its scope: finish on
    its own loop, never here (and then run `then` there), counting the tokens it had read. A
    collection can run while this thread holds the controller's or the limiter's lock (any
    allocation may trigger it), so releasing in place could deadlock on that lock."""

    def finish() -> None:
        holder.finish(usage)
        if then is not None:
            then()

    try:
        loop.call_soon_threadsafe(finish)
    except RuntimeError:  # that loop is closed: a thread of its own takes the locks safely
        threading.Thread(target=holder.finish, args=(usage,), daemon=True).start()


def _weakly(method: Callable[[], None]) -> Callable[[], None]:
    """`method()` while its object lives; nothing once it is gone (its finalizer has run)."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    return call


class LeasedStream(httpx.AsyncByteStream):
    """The body of a streamed response, read through the funnel's lease (see the module)."""

    def __init__(
        self,
        response: httpx.Response,
        lease: Lease,
        timeout: float,
        leave: Callable[[], None],
        ahead: Ahead,
    ) -> None:
        self._response = response
        self._lease = lease
        self._timeout = timeout
        self._usage = StreamUsage()
        self._holder = _Holder(lease, leave)
        self._loop = asyncio.get_running_loop()
        # The usage, not the stream: a finalizer must not keep what it watches alive.
        self._holder.finalizer = weakref.finalize(
            self, _finish_later, self._holder, self._loop, self._usage
        )
        lease.on_reclaim = _weakly(self.close_soon)  # the lease must not keep the stream alive
        # Given the whole body once the stream was read to its end (the model-call cache).
        self.on_complete: Callable[[bytes], Awaitable[None]] | None = None
        self._read: list[bytes] = []
        # Set before reading: takes the usage-only chunk out of what the reader gets (a caller
        # that did not ask for it, `asynceval.funnel._usage_chunk`); the usage is still read.
        self.hide: UsageChunkFilter | None = None
        self._ahead, self._chunks = ahead.chunks, ahead.rest  # what the send read, the rest
        self._reclaimed = False  # closed by `close_soon`: a later read is told why
        for chunk in self._ahead:  # counted now: a stream reclaimed unread still reports them
            self._usage.feed(chunk)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = self._read if self.on_complete is not None else None
        hide = self.hide
        try:
            ahead, self._ahead = self._ahead, []
            for chunk in ahead:  # what the send read ahead, first and unchanged
                if read is not None:
                    read.append(chunk)
                if hide is not None:
                    chunk = hide.feed(chunk)
                if chunk:
                    yield chunk
            delivered, chunks = bool(ahead), self._chunks
            while True:
                try:
                    chunk = await self._next(chunks, delivered)
                except StopAsyncIteration:
                    break
                self._usage.feed(chunk)
                if read is not None:
                    read.append(chunk)
                delivered = True
                if hide is not None:
                    chunk = hide.feed(chunk)
                if chunk:
                    yield chunk
            if hide is not None and (rest := hide.flush()):
                yield rest
        finally:
            self._holder.finish(self._usage)  # at once: the slot is free before any await
            await self.aclose()

    async def _next(self, chunks: AsyncIterator[bytes], delivered: bool) -> bytes:
        """The next chunk within the idle timeout. A stall releases the lease, then raises
        `httpx.ReadTimeout`; a stream its scope reclaimed raises `httpx.ReadError`."""
        lease = self._lease
        if self._reclaimed:
            raise httpx.ReadError(
                "the stream was closed while nobody read it and its task or repetition "
                "waited for a slot (see its stream_abandoned event)",
                request=self._response.request,
            )
        lease.reading = True
        try:
            with anyio.fail_after(self._timeout):
                return await chunks.__anext__()
        except TimeoutError:
            self._holder.finish(self._usage)  # the slot is free before the reader hears of it
            events.stream_stalled(
                agent=lease.agent,
                dimension=lease.dimension,
                call_id=lease.call_id,
                idle_s=self._timeout,
                delivered=delivered,
            )
            raise httpx.ReadTimeout(
                f"no stream chunk within LLM_STREAM_IDLE_TIMEOUT ({self._timeout:g} s)",
                request=self._response.request,
            ) from None
        finally:
            lease.reading = False

    async def aclose(self) -> None:
        self._holder.finish(self._usage)
        with anyio.CancelScope(shield=True):
            await self._response.aclose()
        complete, self.on_complete = self.on_complete, None  # once
        if complete is not None:
            body, self._read = b"".join(self._read), []
            if _finished(body):
                await complete(body)

    def close_soon(self) -> None:
        """Close without blocking or awaiting, from any thread (a dropped sync stream finalized
        on a loop's thread, a stream its repetition left open): the lease is released with the
        tokens read so far, the response closed and its pool entry left, on its loop."""
        self._reclaimed = True
        loop, response = self._loop, self._response

        _finish_later(self._holder, loop, self._usage, lambda: spawn(loop, response.aclose()))


_LAST_EVENTS = (b"data: [DONE]", b"event: message_stop", b"event: response.completed")
# At a line's start: an answer whose text mentions "event: error" is still a whole answer.
_ERROR_EVENTS = (b"\nevent: error", b'\ndata: {"error"', b"\nevent: response.failed")


def _finished(body: bytes) -> bool:
    """Whether server-sent events are a whole, good answer: they end with their dialect's last
    event (chat completions' `data: [DONE]`, Anthropic's `message_stop`, the Responses API's
    `response.completed`; an SDK stops reading there, so the body's own end proves nothing, and a
    stream cut short lacks it) and hold no error event."""
    tail = body[-2048:]
    lines = b"\n" + body  # the first event starts a line too
    return any(last in tail for last in _LAST_EVENTS) and not any(
        error in lines for error in _ERROR_EVENTS
    )


class SyncStream(httpx.SyncByteStream):
    """A `LeasedStream` read from sync code: each chunk is fetched on the stream's loop."""

    def __init__(self, stream: LeasedStream) -> None:
        self._stream = stream
        self._chunks: AsyncIterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        chunks = self._chunks = self._stream.__aiter__()

        async def next_chunk() -> bytes | None:
            try:
                return await chunks.__anext__()
            except StopAsyncIteration:
                return None

        while (chunk := from_thread(next_chunk)) is not None:
            yield chunk

    def close(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from_thread(self._stream.aclose)
        else:  # the garbage collector closing a dropped stream on a loop's thread: never block
            self._stream.close_soon()
