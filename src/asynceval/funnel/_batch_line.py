"""BatchLine: one call's request in the batch lane, from its queueing to its answer; `Batch`:
the lines that went together.

A line is what one call puts into a provider batch (its custom_id is the call's id), and
what the batcher hands back: its answer (`LineResult`). It also holds what the call owes the
run's budget: its worst case, reserved when it is queued (`reserve`) and settled once, to
what its answer cost (a succeeded line, billed at its lane's price), to nothing (a line never
sent, or refused), or to its worst case (a line sent and never collected: the provider may
bill it). A call that stops waiting (cancelled) once its line was sent counts that worst case
into its repetition's usage at once, as a stream left unread does (`abandon`).
"""

from __future__ import annotations

import time
import uuid
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any

import anyio

from ._usage import Usage, UsageCounter, usage_from_json

if TYPE_CHECKING:
    from ._batch_wire import LineResult
    from ._costing import Costing


class State(Enum):
    PENDING = "pending"  # waiting in the batcher for a batch
    SUBMITTED = "submitted"  # in a batch (being created, or at the provider)
    ANSWERED = "answered"  # its answer was handed to its call
    WITHDRAWN = "withdrawn"  # its call stopped waiting: an answer is discarded


class BatchLine:
    """One call's line (see the module); touched on its batcher's event loop only."""

    __slots__ = (
        "_share",
        "cost",
        "costing",
        "counter",
        "custom_id",
        "data",
        "done",
        "key",
        "queued_at",
        "result",
        "state",
        "tokens",
        "url",
    )

    def __init__(
        self,
        custom_id: str,
        data: bytes,
        costing: Costing | None,
        counter: UsageCounter | None,
        key: str | None = None,
        url: str = "",
    ) -> None:
        self.custom_id = custom_id
        self.key = key  # its call-journal key (hex; None: no journal), matched on resume
        self.url = url  # the URL its journal entry is kept under
        self.data = data  # the request as its batch carries it
        self.costing = costing
        self.counter = counter  # its repetition's usage
        self.state = State.PENDING
        self.queued_at = 0.0
        self.done = anyio.Event()
        self.result: LineResult | None = None
        self.tokens: Usage | None = None  # what a succeeded answer reports
        self.cost: Decimal | None = None  # what it cost (None: unpriced, or not answered)
        self._share: Decimal | None = None  # what it holds of the run's budget

    async def reserve(self) -> None:
        """Reserve its worst case against the run's budget, unless it holds it already
        (`BudgetExhausted` when it does not fit)."""
        costing = self.costing
        if costing is None or costing.budget is None or self._share is not None:
            return
        share = costing.worst_case()
        await costing.budget.reserve(share)
        self._share = share

    def settle(self, cost: Decimal | None) -> None:
        """What it cost, against its reservation (once; a later `reserve` may hold anew)."""
        share, self._share = self._share, None
        if share is not None and self.costing is not None and self.costing.budget is not None:
            self.costing.budget.settle(share, cost or Decimal(0))

    def worst_case(self) -> Decimal | None:
        costing = self.costing
        if costing is None or costing.price is None:
            return None
        return self._share if self._share is not None else costing.worst_case()

    def again(self) -> None:
        """Ready to be queued again (a later batch)."""
        self.state = State.PENDING
        self.done = anyio.Event()
        self.result = None
        self.tokens = None
        self.cost = None

    def answer(self, result: LineResult) -> Decimal | None:
        """Its batch's answer: priced (a success), then handed to its call if it still waits,
        else settled and dropped. Returns what it cost (None: nothing billed, or unpriced)."""
        cost = None
        if result.succeeded:
            self.tokens = usage_from_json(result.body)
            price = None if self.costing is None else self.costing.price
            tokens = self.tokens
            if price is not None and tokens is None:
                cost = self.worst_case()  # an answer that says nothing of its usage
            elif price is not None and tokens is not None:
                assert self.costing is not None
                self.costing.observed(tokens.prompt_tokens)  # tokens per byte above 1
                cost = price.cost(
                    tokens.prompt_tokens,
                    tokens.completion_tokens,
                    tokens.cached_tokens,
                    tokens.cache_write_tokens,
                )
            self.cost = cost
            self.settle(cost)
        if self.state is State.WITHDRAWN:
            self.settle(Decimal(0))  # refused or not done: nothing billed
            return cost
        self.state = State.ANSWERED
        self.result = result
        self.done.set()
        return cost

    def abandon(self) -> bool:
        """Its call stopped waiting. A line not sent yet is dropped (True: take it out of the
        queue); a sent one is discarded when it comes, its worst case counted now."""
        state, self.state = self.state, State.WITHDRAWN
        if state is State.PENDING:
            self.settle(Decimal(0))
            return True
        if state is State.SUBMITTED and self.counter is not None:
            self.counter.llm_calls += 1  # sent: the provider has it, as a live call cut short
            if self.costing is not None:
                self.counter.add_cost(self.costing.model, self.worst_case(), worst_case=True)
        if state is State.ANSWERED:
            self.state = state  # answered already: its call counts it
        return False

    def lost(self, why: str = "its batch was cancelled, or the batch lane stopped") -> None:
        """Its batch will never say (cancelled, or its batcher ended): a line sent costs its
        worst case; a call still waiting is told (not done: `expired`, not to be sent again)."""
        import json

        from ._batch_wire import LineResult

        if self.state in (State.WITHDRAWN, State.SUBMITTED):
            self.settle(self.worst_case())
        if self.state in (State.PENDING, State.SUBMITTED):
            body = json.dumps({"error": {"message": why}}).encode()
            self.answer(LineResult(self.custom_id, "expired", None, body, final=True))


class Batch:
    """One batch: its lines, its key (journaled before it exists), then the provider's id."""

    __slots__ = (
        "cost", "done", "found", "id", "key", "last", "lines", "live", "orphaned", "reported",
        "started",
    )  # fmt: skip

    def __init__(self, lines: list[BatchLine]) -> None:
        self.lines = lines
        self.key = uuid.uuid4().hex
        self.id: str | None = None
        self.live = len(lines)  # lines whose call still waits
        self.orphaned = anyio.Event()  # no call waits any more
        self.started = time.monotonic()
        self.last: dict[str, Any] = {}  # the provider's batch object, as last seen
        self.done = False  # its answers were collected (or it failed)
        self.reported = False  # its `batch_completed` was written
        self.cost: Decimal | None = None
        self.found: dict[str, LineResult] = {}  # its answers by custom_id, once collected
