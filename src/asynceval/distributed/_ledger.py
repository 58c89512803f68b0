"""A run's cost budget on the Dask scheduler: the one ledger every worker reserves from.

Each worker's `ClusterBudget` (`_budget`) asks here before each request (`RESERVE`): the check
that the request's worst case fits beside what is spent and reserved, and its reservation, are
one step on the scheduler's loop, so however many workers ask at once the run never reserves
more than its limit (DESIGN section 15). A reservation that does not fit waits here while
requests in flight may settle (at most `wait_s`, then its worker asks again), so that a nearly
spent budget serialises instead of failing early; one that does not fit when nothing in flight
can free any exhausts the budget: it and every later one are refused, and the caller hears it
at once on the run's budget topic (so that it starts no new repetition).

What the workers' requests really cost comes back in `SETTLE` messages, each the sum of what
changed on that worker since its last (settled costs, reservations given back, requests that
became streams), numbered so that a message sent twice counts once. A worker that leaves the
cluster leaves its reservations spent at their worst case (the provider may bill them) and no
longer waited for. `STATE` is the ledger as it stands, read by the caller at the run's end.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import anyio
from distributed.diagnostics.plugin import SchedulerPlugin

RESERVE, SETTLE, STATE = (
    "asynceval_budget_reserve",
    "asynceval_budget_settle",
    "asynceval_budget_state",
)
GRANTED, EXHAUSTED, WAIT, GONE = "granted", "exhausted", "wait", "gone"
"""`RESERVE`'s answers: reserved; refused (the budget is exhausted); not yet, ask again; this
ledger or this worker is no longer the run's (a run since resumed, a worker removed)."""


def plugin_name(run_id: str) -> str:
    return f"{run_id}-budget"


def budget_topic(run_id: str) -> str:
    """Where the scheduler tells the caller that the run's budget is exhausted."""
    return f"asynceval-{run_id}-budget"


class _Account:
    """What the scheduler knows of one worker's reservations (one `ClusterBudget`)."""

    __slots__ = ("address", "gone", "reserved", "seq", "waitable")

    def __init__(self, address: str) -> None:
        self.address = address
        self.reserved = Decimal(0)
        self.waitable = 0  # of its requests, those that will settle on their own
        self.seq = 0  # the last SETTLE message counted
        self.gone = False  # its worker left the cluster: its reservations were spent


class BudgetPlugin(SchedulerPlugin):
    """One run's budget on the scheduler (see the module), and the three handlers, installed
    once per scheduler. `ledger` names this budget: a resumed run (same run id, a new budget)
    replaces the plugin, and what the workers of the run before still send is not counted."""

    def __init__(self, run_id: str, ledger: str, limit: Decimal) -> None:
        self.run_id = run_id
        self.ledger = ledger
        self.limit = limit
        self.spent = Decimal(0)
        self.reserved = Decimal(0)
        self.waitable = 0
        self.exhausted = False
        self.refused = 0
        self.overrun = Decimal(0)
        self._accounts: dict[str, _Account] = {}
        self._waiting: list[anyio.Event] = []  # reservations waiting for a change
        self._scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        self._scheduler = scheduler
        # A ledger a killed caller left goes now (Dask would warn as it replaced it).
        scheduler.plugins.pop(plugin_name(self.run_id), None)

        # Functions, not partials: Dask logs each handler it calls by its __name__.
        async def asynceval_budget_reserve(
            run: str, ledger: str, sender: str, worker: str, amount: str, wait_s: float
        ) -> tuple[str, str]:
            plugin = _plugin(scheduler, run, ledger)
            if plugin is None:
                return GONE, "0"
            return await plugin.reserve(sender, worker, Decimal(amount), wait_s)

        def asynceval_budget_settle(
            run: str,
            ledger: str,
            sender: str,
            worker: str,
            seq: int,
            reserved: str,
            cost: str,
            waitable: int,
            overrun: str,
        ) -> None:
            plugin = _plugin(scheduler, run, ledger)
            if plugin is not None:
                plugin.settle(
                    sender,
                    worker,
                    seq,
                    Decimal(reserved),
                    Decimal(cost),
                    waitable,
                    Decimal(overrun),
                )

        def asynceval_budget_state(run: str, ledger: str) -> dict[str, Any] | None:
            plugin = _plugin(scheduler, run, ledger)
            return plugin.state() if plugin is not None else None

        scheduler.handlers.setdefault(RESERVE, asynceval_budget_reserve)
        scheduler.handlers.setdefault(SETTLE, asynceval_budget_settle)
        scheduler.handlers.setdefault(STATE, asynceval_budget_state)

    async def reserve(
        self, sender: str, worker: str, amount: Decimal, wait_s: float
    ) -> tuple[str, str]:
        """(`GRANTED`, `EXHAUSTED`, `WAIT` or `GONE`, what is spent or reserved then)."""
        account = self._account(sender, worker)
        with anyio.move_on_after(wait_s):
            while True:
                if account.gone:  # (also while it waited: its worker has left)
                    return GONE, str(self.spent + self.reserved)
                if not self.exhausted:
                    if self.spent + self.reserved + amount <= self.limit:
                        self.reserved += amount
                        self.waitable += 1
                        account.reserved += amount
                        account.waitable += 1
                        return GRANTED, str(self.spent + self.reserved)
                    if self.waitable <= 0:
                        self._exhaust()
                if self.exhausted:
                    self.refused += 1
                    return EXHAUSTED, str(self.spent + self.reserved)
                changed = anyio.Event()
                self._waiting.append(changed)
                try:
                    await changed.wait()
                finally:
                    if changed in self._waiting:
                        self._waiting.remove(changed)
        return WAIT, str(self.spent + self.reserved)

    def settle(
        self,
        sender: str,
        worker: str,
        seq: int,
        reserved: Decimal,
        cost: Decimal,
        waitable: int,
        overrun: Decimal,
    ) -> None:
        """A worker's message `seq`: its requests gave back `reserved`, cost `cost` (`overrun`
        of it beyond their reservations), and `waitable` of them are no longer waited for
        (settled, or become streams). Counted once; nothing for a worker that has left."""
        account = self._account(sender, worker)
        if account.gone or seq <= account.seq:
            return
        account.seq = seq
        account.reserved -= reserved
        account.waitable -= waitable
        self.reserved -= reserved
        self.waitable -= waitable
        self.spent += cost
        self.overrun += overrun
        self._changed()

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        """A worker left the cluster: what its requests reserved is spent (the provider may
        have billed them), and they are no longer waited for."""
        for account in self._accounts.values():
            if account.address != worker or account.gone:
                continue
            account.gone = True
            self.spent += account.reserved
            self.reserved -= account.reserved
            self.waitable -= account.waitable
            account.reserved, account.waitable = Decimal(0), 0
        self._changed()

    def state(self) -> dict[str, Any]:
        """The ledger as it stands (amounts as decimal strings)."""
        return {
            "limit": str(self.limit),
            "spent": str(self.spent),
            "reserved": str(self.reserved),
            "waitable": self.waitable,
            "exhausted": self.exhausted,
            "refused": self.refused,
            "overrun": str(self.overrun),
        }

    def _account(self, sender: str, worker: str) -> _Account:
        account = self._accounts.get(sender)
        if account is None:
            account = self._accounts[sender] = _Account(worker)
        return account

    def _exhaust(self) -> None:
        """Sticky: every later reservation is refused; the caller is told now."""
        self.exhausted = True
        self._changed()
        if self._scheduler is not None:
            self._scheduler.log_event(budget_topic(self.run_id), {"exhausted": True})

    def _changed(self) -> None:
        """What is spent or reserved changed: the reservations waiting look again."""
        waiting, self._waiting = self._waiting, []
        for changed in waiting:
            changed.set()


def _plugin(scheduler: Any, run: str, ledger: str) -> BudgetPlugin | None:
    """The run's ledger, if it is still the one named `ledger`."""
    plugin = scheduler.plugins.get(plugin_name(run))
    if isinstance(plugin, BudgetPlugin) and plugin.ledger == ledger:
        return plugin
    return None
