"""Leases that outlive their attempt (a streamed answer being read), and what becomes of one
whose stream the consumer dropped without reading it to the end or closing it.

Nothing tells a stream that its consumer broke out of `async for`: the OpenAI SDK's stream keeps
itself alive through its own suspended generator, so only the garbage collector's cycle pass
finds it. Three rules bound how long such a stream holds a slot:

- a caller about to wait for a slot (none is free) while its scope (its repetition attempt, else
  its own task or thread) holds streams nobody is reading closes them first, with a
  `stream_abandoned` event each, whether a variable still refers to them (`stream = ...;
  async for _ in stream: break`) or not: so a task at limit 1 is never blocked by a stream it
  left, and a run of such tasks never deadlocks;
- the garbage collector frees a dropped stream's slot whenever it finds the stream (its
  finalizer releases the lease on the stream's loop);
- `reclaiming_leases()` (the engine opens one per repetition attempt) releases, when it ends,
  every lease still held by streams opened inside it, with a `stream_abandoned` event each.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import NamedTuple, Protocol

import anyio
import anyio.lowlevel

from .. import events
from .._scoped import Scoped
from ..limits import ConcurrencyController


class HeldLease(Protocol):
    """What the scope needs of a kept lease (`_lease.Lease`)."""

    reading: bool

    @property
    def call_id(self) -> str: ...

    @property
    def agent(self) -> str | None: ...

    @property
    def dimension(self) -> str | None: ...

    def reclaim(self) -> None: ...


Held = dict[HeldLease, None]
"""One scope's kept leases, in the order they were kept (a dict: O(1) removal, ordered)."""


class _Scope(NamedTuple):
    owner: object  # the task or thread it belongs to; None: all of a repetition attempt's
    held: Held
    parent: _Scope | None = None  # the scope this one's task or thread was started in


_scope: ContextVar[_Scope | None] = ContextVar("asynceval_held_leases", default=None)


def _owner() -> object:
    """The asyncio task running this code, else its thread. A context var is inherited by
    every task and thread started from here, so each scope says whose it is."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop runs in this thread
        task = None
    return task if task is not None else threading.current_thread()


def current_scope() -> Held:
    """Where a lease kept here is recorded: the innermost `reclaiming_leases()` (shared by the
    attempt's tasks and threads), else this task's or thread's own, made on first use. Never
    process-wide: a task's slot wait must not close other tasks' streams."""
    scope = _scope.get()
    if scope is not None and (scope.owner is None or scope.owner is _owner()):
        return scope.held
    held: Held = {}
    _scope.set(_Scope(_owner(), held, scope))
    return held


def scope_if_any() -> Held | None:
    """The kept leases a slot wait here looks at: this task's (or thread's, or attempt's) own
    if it holds any, else those of the nearest task it was started from that holds some (a
    call in `asyncio.wait_for` or a task group, while the task that started it holds a stream
    it left); None if there are none. Made by nothing; a sibling's are never seen."""
    scope = _scope.get()
    if scope is None:
        return None
    if scope.owner is None or scope.owner is _owner():
        if scope.held or scope.parent is None:
            return scope.held
        scope = scope.parent
    while scope is not None:  # the tasks this one was started from: they wait for it, or idle
        if scope.held:
            return scope.held
        scope = scope.parent
    return None


@contextmanager
def adopted(held: Held) -> Iterator[None]:
    """Record leases kept here in `held`: a sync client's thread's scope, adopted by the task
    that makes the request for it on a loop."""
    token = _scope.set(_Scope(_owner(), held))
    try:
        yield
    finally:
        _scope.reset(token)


async def collect_if_dropped(
    held: Held, controller: ConcurrencyController | None = None, endpoint: str | None = None
) -> bool:
    """Before a slot wait for `endpoint` on `controller`: if no slot is free for it and `held`
    has streams nobody is reading (dropped unclosed, or still referenced: `async for ...:
    break`), close them, with a `stream_abandoned` event each, so that the caller does not wait,
    perhaps forever, for a slot it holds itself. A stream being read (by another task of the
    scope) is never closed; one that its reader holds between two reads is. True if any was.

    No garbage collection: a full one costs tens of milliseconds on a large heap, blocking the
    loop, and would only tell a dropped stream from a referenced one, which end the same way.
    While a slot is free, nothing is closed: the stream blocks nobody yet.
    """
    idle = [lease for lease in list(held) if not lease.reading]  # released from any thread
    if controller is None or not idle or not _must_wait(controller, endpoint):
        return False
    for lease in idle:
        if held.pop(lease, False) is not None:
            continue  # released meanwhile, or claimed by another caller of the scope
        events.stream_abandoned(agent=lease.agent, dimension=lease.dimension, call_id=lease.call_id)
        lease.reclaim()
    await anyio.lowlevel.checkpoint()  # their releases run on their loop (this one) first
    return True


def _must_wait(controller: ConcurrencyController, endpoint: str | None) -> bool:
    """Whether a slot for `endpoint` would not be granted at once: every slot is taken, callers
    are in line already, or the endpoint's adaptive limit is lowered (its own count is not
    public; a lowered limit is rare and the streams it closes are unread). A pause alone does
    not count: it ends by itself."""
    stats = controller.statistics()
    return (
        stats.active >= stats.limit
        or stats.waiting > 0
        or controller.endpoint_limit(endpoint) < stats.limit
    )


def reclaiming_leases() -> _Reclaiming:
    """A scope whose streams' leases are released when it ends if their consumer has not
    (read to the end, closed, or collected): a repetition's abandoned stream holds no slot after
    the repetition."""
    return _Reclaiming(_scope, _Scope(None, {}))


class _Reclaiming(Scoped[_Scope]):
    """`reclaiming_leases()`'s block (a class: entered once per repetition attempt)."""

    __slots__ = ()

    def __enter__(self) -> Held:  # type: ignore[override]
        return super().__enter__().held

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        for lease in list(self._value.held):
            events.stream_abandoned(
                agent=lease.agent, dimension=lease.dimension, call_id=lease.call_id
            )
            lease.reclaim()
