"""A run's cost budget on a Dask cluster: the workers reserve from one ledger on the scheduler
(`_ledger`), as they take the run's rate windows and LLM-call leases there.

On a worker, `ClusterBudget` is the `CostBudget` its repetitions' calls find (`budget_scope`):
each request's reservation is a round trip to the scheduler, made before it is sent; what the
request cost, and that it became a stream, come from `Lease.release` in any thread, possibly a
finalizer, so they never wait: they are added to what this worker owes the ledger, and one
message at a time takes all that is owed to the scheduler, numbered, sent again until the
scheduler has it (a settle lost would leave its reservation counted for the rest of the run).
If the scheduler is gone for good, the run ends anyway (`BackendLost` at the caller).

At the caller, `RunBudget` installs the run's ledger, hears on the run's budget topic (and from
each `budget_exhausted` report) that it is exhausted, and brings its figures into the run's own
`CostBudget` at the end, so that `run_finished`, `Benchmark.budget` and the command line's
"budget exhausted" line and exit status speak of the whole cluster's spending.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack
from decimal import Decimal
from typing import Any

import anyio
import anyio.lowlevel
from distributed import Client

from ..engine.status import TaskExecutionStatus
from ..errors import BudgetExhausted, RunFinished
from ..limits import CostBudget
from ._ledger import (
    EXHAUSTED,
    GONE,
    GRANTED,
    RESERVE,
    SETTLE,
    STATE,
    BudgetPlugin,
    budget_topic,
    plugin_name,
)

WAIT_S = 0.25
"""How long a reservation that does not fit yet waits on the scheduler before it asks again
(while it waits, a cancellation of its call is heard only at the answer)."""
RETRY_S = (0.05, 1.0)
"""The first and the longest pause before a settle message the scheduler did not take is sent
again."""
CLOSE_WAIT_S = 5.0
"""How long a worker's run state, as it closes, waits for what it owes the ledger to be sent."""


class _Owed:
    """What changed on a worker since its last message to the ledger."""

    __slots__ = ("cost", "overrun", "reserved", "waitable")

    def __init__(self) -> None:
        self.reserved = Decimal(0)  # reservations given back
        self.cost = Decimal(0)  # what their requests cost
        self.overrun = Decimal(0)  # of that, beyond their reservations
        self.waitable = 0  # requests no longer waited for (settled, or become streams)

    def __bool__(self) -> bool:
        return bool(self.waitable or self.reserved or self.cost or self.overrun)


class ClusterBudget(CostBudget):
    """A worker's view of the run's budget on the scheduler (see the module). `spent`,
    `reserved`, `refused` and `overrun` are this worker's; `exhausted` is set once the
    scheduler has said so (every later request is then refused here, without asking)."""

    def __init__(
        self,
        run_id: str,
        ledger: str,
        limit: Decimal | str,
        scheduler: Any,
        loop: asyncio.AbstractEventLoop,
        address: str,
    ) -> None:
        super().__init__(limit)
        self._run = run_id
        self._ledger = ledger
        self._scheduler = scheduler
        self._loop = loop
        self._address = address
        self._sender = uuid.uuid4().hex
        self._owed = _Owed()
        self._seq = 0
        self._message: dict[str, Any] | None = None  # sent, not yet taken by the scheduler
        self._sending: asyncio.Task[None] | None = None
        self._thread = threading.get_ident()  # the worker loop's
        # Re-entrant: a lease's finalizer may settle in this thread while it holds the lock.
        self._lock = threading.RLock()  # type: ignore[assignment]

    async def reserve(self, amount: Decimal) -> None:
        """Reserve `amount` on the scheduler: at once if it fits, after requests in flight
        anywhere settle if it fits then; else `BudgetExhausted` (and from then on always)."""
        while True:
            if self.exhausted:
                self.refused += 1
                raise BudgetExhausted(
                    float(self.limit), float(self._spent + self._reserved), float(amount)
                )
            await anyio.lowlevel.checkpoint_if_cancelled()
            # Shielded: a reservation made on the scheduler must come back to be settled.
            with anyio.CancelScope(shield=True):
                answer, taken = await self._ask(amount)
            if answer == GRANTED:
                with self._lock:
                    self._reserved += amount
                return
            if answer == EXHAUSTED:
                self.exhausted = True
                self.refused += 1
                raise BudgetExhausted(float(self.limit), float(Decimal(taken)), float(amount))
            if answer == GONE:
                raise RunFinished(f"run {self._run} has ended: its budget is no longer kept")
            # Not yet: requests in flight may still settle. Asked again (a cancellation now
            # leaves nothing reserved).

    async def _ask(self, amount: Decimal) -> tuple[str, str]:
        """One `RESERVE` round trip, on the worker's loop (where its connections live)."""
        ask = getattr(self._scheduler, RESERVE)(
            run=self._run,
            ledger=self._ledger,
            sender=self._sender,
            worker=self._address,
            amount=str(amount),
            wait_s=WAIT_S,
        )
        if asyncio.get_running_loop() is self._loop:
            answer = await ask
        else:
            answer = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(ask, self._loop))
        return str(answer[0]), str(answer[1])

    def streaming(self) -> None:
        with self._lock:
            self._owed.waitable += 1
        self._kick()

    def settle(self, reserved: Decimal, cost: Decimal, *, waited: bool = True) -> None:
        with self._lock:
            self._reserved -= reserved
            self._spent += cost
            owed = self._owed
            owed.reserved += reserved
            owed.cost += cost
            if cost > reserved:
                self.overrun += cost - reserved
                owed.overrun += cost - reserved
            if waited:
                owed.waitable += 1
        self._kick()

    def _kick(self) -> None:
        """From any thread, without waiting: what is owed goes out on the worker's loop."""
        if threading.get_ident() == self._thread:
            self._start_sending()
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the worker is gone
            self._loop.call_soon_threadsafe(self._start_sending)

    def _start_sending(self) -> None:
        if self._sending is None:
            self._sending = self._loop.create_task(self._send())

    async def _send(self) -> None:
        try:
            await self._send_owed()
        finally:
            self._sending = None
        if self.owing:  # a settle came as it ended
            self._start_sending()

    async def _send_owed(self) -> None:
        """Send what is owed, one numbered message at a time, each until the scheduler took it
        (sent twice, it is counted once), until nothing is owed."""
        pause = RETRY_S[0]
        while True:
            with self._lock:
                if self._message is None:
                    if not self._owed:
                        return
                    owed, self._owed = self._owed, _Owed()
                    self._seq += 1
                    self._message = {
                        "run": self._run,
                        "ledger": self._ledger,
                        "sender": self._sender,
                        "worker": self._address,
                        "seq": self._seq,
                        "reserved": str(owed.reserved),
                        "cost": str(owed.cost),
                        "waitable": owed.waitable,
                        "overrun": str(owed.overrun),
                    }
                message = self._message
            try:
                await getattr(self._scheduler, SETTLE)(**message)
            except Exception:  # not taken (a connection lost): the same message again
                await anyio.sleep(pause)
                pause = min(pause * 2, RETRY_S[1])
                continue
            self._message = None
            pause = RETRY_S[0]

    @property
    def owing(self) -> bool:
        """Whether something is still to reach the scheduler."""
        with self._lock:
            return bool(self._owed) or self._message is not None or self._sending is not None

    async def flushed(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Wait (at most `wait_s`) until the scheduler has all this worker owes it; whether
        it has."""
        with anyio.move_on_after(wait_s):
            while self.owing:
                sending = self._sending
                if sending is None:  # owed, its send not started yet: now
                    self._start_sending()
                else:
                    await asyncio.wait([sending])
        return not self.owing

    def __repr__(self) -> str:
        return (
            f"ClusterBudget(run={self._run!r}, limit={self.limit}, spent here={self._spent}, "
            f"reserved here={self._reserved}, exhausted={self.exhausted})"
        )


class RunBudget:
    """The caller's side of a run's budget on the cluster (see the module)."""

    def __init__(self, client: Client, run_id: str, budget: CostBudget) -> None:
        self.client = client
        self.run_id = run_id
        self.budget = budget
        self.ledger = uuid.uuid4().hex

    @property
    def for_workers(self) -> tuple[str, str]:
        """What the workers need to reach the ledger: its name and the limit."""
        return self.ledger, str(self.budget.limit)

    async def open(self, stack: AsyncExitStack) -> None:
        """Install the ledger on the scheduler (before any worker can ask it), listening for
        its exhaustion; `stack` takes both down."""
        topic = budget_topic(self.run_id)
        self.client.subscribe_topic(topic, self._on_exhausted)
        stack.callback(self.client.unsubscribe_topic, topic)
        # What is left of the run's total: a resumed run's earlier segments spent the rest.
        plugin = BudgetPlugin(self.run_id, self.ledger, self.budget.limit - self.budget.before)
        await self.client.register_plugin(plugin, name=plugin_name(self.run_id))
        stack.push_async_callback(self._unregister)

    def _on_exhausted(self, event: tuple[float, Any]) -> None:
        self.budget.exhausted = True  # the run starts no new repetition

    def saw(self, report: Mapping[str, Any]) -> None:
        """A repetition's report: one the budget stopped says it is exhausted (in case the
        topic's message is late)."""
        if report.get("status") == TaskExecutionStatus.BUDGET_EXHAUSTED:
            self.budget.exhausted = True

    async def take_figures(self) -> None:
        """The ledger's figures into the run's `CostBudget` (once the workers sent theirs):
        what the cluster spent (requests still in flight, if any, stay reserved there), its
        refusals and overrun, and whether it is exhausted."""
        state = await getattr(self.client.scheduler, STATE)(run=self.run_id, ledger=self.ledger)
        if not isinstance(state, Mapping):
            return
        self.budget.take(
            spent=Decimal(state["spent"]),
            refused=int(state["refused"]),
            overrun=Decimal(state["overrun"]),
            exhausted=bool(state["exhausted"]),
        )

    async def _unregister(self) -> None:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(5),
            contextlib.suppress(Exception),  # the scheduler may be gone
        ):
            await self.client.unregister_scheduler_plugin(plugin_name(self.run_id))
