"""Leases that outlive their attempt (a streamed answer being read), and what becomes of one
whose stream the consumer dropped without reading it to the end or closing it.

Nothing tells a stream that its consumer broke out of `async for`: the OpenAI SDK's stream keeps
itself alive through its own suspended generator, so only the garbage collector's cycle pass
finds it. Two rules bound how long such a stream holds a slot:

- a caller about to wait for a slot while its scope holds a stream nobody is reading runs the
  collector once first (a dropped stream's finalizer then frees its slot on its own loop), so a
  task at limit 1 is never blocked by the stream it abandoned;
- `reclaiming_leases()` (the engine opens one per repetition attempt) releases, when it ends,
  every lease still held by streams opened inside it, with a `stream_abandoned` event each.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

import anyio
import anyio.lowlevel

from .. import events

_FINALIZER_TURNS = 3


class HeldLease(Protocol):
    """What the scope needs of a kept lease (`gateway.Lease`)."""

    reading: bool

    @property
    def call_id(self) -> str: ...

    @property
    def agent(self) -> str | None: ...

    @property
    def dimension(self) -> str | None: ...

    def release(self) -> None: ...


Held = dict[HeldLease, None]
"""One scope's kept leases, in the order they were kept (a dict: O(1) removal, ordered)."""

_UNSCOPED: Held = {}  # streams opened outside any engine attempt (the user's own code)
_scope: ContextVar[Held | None] = ContextVar("asynceval_held_leases", default=None)


def current_scope() -> Held:
    """Where a lease kept here is recorded: the innermost `reclaiming_leases()`, else the
    process-wide set."""
    scope = _scope.get()
    return _UNSCOPED if scope is None else scope


async def collect_if_dropped(held: Held) -> bool:
    """Before a slot wait: if `held` has a stream nobody is reading, run the garbage collector
    once so a dropped one gives its slot back (its finalizer schedules the release). True if it
    ran. A stream still referenced is untouched: it is only not being read at this moment."""
    if not any(not lease.reading for lease in list(held)):
        return False
    # A broken `async for` leaves the SDK's async-generator wrapper to asyncio's finalizer hook,
    # which closes it two loop turns later; until then it still references the stream.
    for _ in range(_FINALIZER_TURNS):
        await anyio.lowlevel.checkpoint()
    gc.collect()
    return True


@contextmanager
def reclaiming_leases() -> Iterator[Held]:
    """A scope whose streams' leases are released when it ends if their consumer has not
    (read to the end, closed, or collected): a repetition's abandoned stream holds no slot after
    the repetition."""
    held: Held = {}
    token = _scope.set(held)
    try:
        yield held
    finally:
        _scope.reset(token)
        for lease in list(held):
            events.stream_abandoned(
                agent=lease.agent, dimension=lease.dimension, call_id=lease.call_id
            )
            lease.release()
