"""A worker's `ConcurrencyController`, whose slots tell the cluster's leases which endpoint they
are for (`ClusterSlots.acquire` reads it from `asking_for`): the lease line skips, or sends back
to the worker's own line, a call for a paused endpoint, and goes on serving the others.

(The `SharedLimit` protocol's `acquire()` takes no endpoint; were it given one by `Slot`, this
subclass would have nothing left to do but the sending back.)
"""

from __future__ import annotations

from contextvars import ContextVar

from ..limits import ConcurrencyController, Slot

asking_for: ContextVar[tuple[str | None] | None] = ContextVar("asynceval_lease_for", default=None)
"""(endpoint,) of the call whose slot `ClusterController` is taking, which can wait out a pause
in the worker's line (`_Bounced`); None for any other caller."""


class _Bounced(Exception):
    """Raised to a caller waiting for a lease whose endpoint is paused, so that it gives its
    worker's own slot back and waits out the pause in that worker's line (never escapes
    `ClusterController`'s slots)."""


class ClusterController(ConcurrencyController):
    """A worker's controller: its slots tell the cluster's leases (`ClusterSlots.acquire`) which
    endpoint they are for, so a lease is never handed to a call for a paused endpoint."""

    def slot(
        self,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        call_id: str | None = None,
        endpoint: str | None = None,
        front: bool = False,
    ) -> Slot:
        """`ConcurrencyController.slot`, whose lease is told the endpoint."""
        return _EndpointSlot(self, agent, dimension, call_id, endpoint, front)


class _EndpointSlot(Slot):
    """A slot whose cluster lease knows its endpoint. A caller sent back by a pause (`_Bounced`,
    its own slot given back and a `cancelled` event written) queues again in the worker's line,
    from the front, where the pause holds it without a slot."""

    __slots__ = ()

    async def __aenter__(self) -> Slot:
        while True:
            token = asking_for.set((self.endpoint,))  # for the lease taken after the own slot
            try:
                return await super().__aenter__()  # gives the own slot back on any error
            except _Bounced:
                self.front = True  # it waited its turn already: ahead of later arrivals
            finally:
                asking_for.reset(token)
