"""Where a run's cluster-wide leases are granted: the scheduler, which also holds its 429 pauses.

A rate 429 on one worker pauses the endpoint everywhere before the refused worker's lease goes
back to the scheduler, in this order (DESIGN section 17):

1. that worker sends the pause here (`PAUSE`) and holds back every lease it would return until
   the answer comes (`ClusterSlots`);
2. here the pause is recorded at once, then sent to every worker (`PAUSE_HERE`, which pauses
   their own controllers and leases), and only then answered;
3. each lease granted here (`LEASE`, in place of Dask's own `semaphore_acquire`) comes with the
   pauses in force, so a worker the broadcast missed (it joined later, or did not answer within
   `BROADCAST_WAIT_S`) still hands no lease to a call for a paused endpoint.

Times here are the scheduler's `time.monotonic()`; what travels is seconds left, which a worker
counts from when it hears them, so a pause is never shortened by clocks that differ, only
lengthened by the hop's latency.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from distributed.diagnostics.plugin import SchedulerPlugin

LEASE, PAUSE = "asynceval_lease", "asynceval_pause"
PAUSE_HERE = "asynceval_pause_here"
"""The workers' handler for a pause the scheduler sends them (`_worker.RunPlugin` installs it)."""
BROADCAST_WAIT_S = 1.0
"""How long the scheduler waits for the workers to take a pause in before it answers (a worker
that is slower still learns it from its next grant)."""


def plugin_name(run_id: str) -> str:
    return f"{run_id}-grants"


class GrantPlugin(SchedulerPlugin):
    """One run's pauses on the scheduler (endpoint -> end, in the scheduler's monotonic clock),
    and the two handlers, installed once per scheduler. Unregistering it forgets them."""

    idempotent = True
    """A resumed run (same id) keeps the plugin, and the pauses, its killed caller left."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.pauses: dict[str, float] = {}

    async def start(self, scheduler: Any) -> None:
        # Functions, not partials: Dask logs each handler it calls by its __name__.
        async def asynceval_lease(
            run: str, name: str, poll_s: float, lease_id: str
        ) -> tuple[bool, dict[str, float]]:
            return await _lease(scheduler, run, name, poll_s, lease_id)

        async def asynceval_pause(run: str, endpoint: str, seconds: float) -> None:
            await _pause(scheduler, run, endpoint, seconds)

        scheduler.handlers.setdefault(LEASE, asynceval_lease)
        scheduler.handlers.setdefault(PAUSE, asynceval_pause)

    def in_force(self) -> dict[str, float]:
        """Seconds left of each endpoint's pause still running (ended ones are dropped)."""
        now = time.monotonic()
        for endpoint in [e for e, until in self.pauses.items() if until <= now]:
            del self.pauses[endpoint]
        return {endpoint: until - now for endpoint, until in self.pauses.items()}


def _plugin(scheduler: Any, run: str) -> GrantPlugin | None:
    plugin = scheduler.plugins.get(plugin_name(run))
    return plugin if isinstance(plugin, GrantPlugin) else None


async def _lease(
    scheduler: Any, run: str, name: str, poll_s: float, lease_id: str
) -> tuple[bool, dict[str, float]]:
    """Dask's `semaphore_acquire`, with the run's pauses as they stand once it is granted (a
    lease another worker gave back after its 429 is granted only once that pause is here); a
    request not granted within `poll_s` gets (False, {}) and asks again."""
    granted = await scheduler.extensions["semaphores"].acquire(
        name=name, timeout=poll_s, lease_id=lease_id
    )
    plugin = _plugin(scheduler, run)
    return bool(granted), plugin.in_force() if plugin is not None and granted else {}


async def _pause(scheduler: Any, run: str, endpoint: str, seconds: float) -> None:
    """A worker's 429 paused `endpoint` for `seconds`: recorded at once (before any await, so
    before the refused worker can give its lease back), then sent to every worker; answered
    when they have it, or after `BROADCAST_WAIT_S`. Nothing for a run this scheduler does
    not know (it has ended)."""
    plugin = _plugin(scheduler, run)
    if plugin is None or not seconds > 0:
        return
    now = time.monotonic()
    until = plugin.pauses[endpoint] = max(plugin.pauses.get(endpoint, 0.0), now + seconds)
    message = {"op": PAUSE_HERE, "run": run, "endpoint": endpoint, "seconds": until - now}
    with anyio.move_on_after(BROADCAST_WAIT_S):
        await scheduler.broadcast(msg=message, on_error="ignore")  # a dead worker: no matter
