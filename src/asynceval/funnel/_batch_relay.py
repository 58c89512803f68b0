"""Batch lines relayed to another process's batches (DESIGN sections 10 and 16: "On Dask,
workers' calls join the caller's batches").

A runtime whose `BatchLane` has a `relay` (a Dask worker's) does not make batches of its own:
each batchable call's line goes, through the relay, to the process that owns the run (the
caller), which puts it into ITS batcher for the line's batch endpoint beside every other
worker's lines (`relayed_line`), so the run makes as few batches as one process would, each
created under the run's journal and limit, and cancelled there when its calls have gone. The
answer comes back by custom_id to the call that waits for it, which reads it, counts it and
sends it again within RETRY_MAX_ATTEMPTS exactly as in one process (`_batch_call`).

What the relay moves is plain data (`RelayedLine`: the line as its batch carries it, its batch
API and who asks; a `LineResult` back as a tuple), so any transport between the processes
will do. A call that stops waiting withdraws its line at the owner. A line relayed counts as
sent: a call cancelled after it counts the line's worst case, as a live call cut short does,
since the owner may have put it in a batch already.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ._batch_line import BatchLine, State
from ._batch_wire import BatchWire, LineResult

if TYPE_CHECKING:
    from ..runtime import Runtime


class RelayedLine(TypedDict):
    """One line on its way to the owner's batches: `id` its custom_id, `base` and `suffix` its
    batch API (`BatchWire.base`, `.suffix`), `headers` who asks, `data` the line itself."""

    id: str
    base: str
    suffix: str
    headers: dict[str, str]
    data: str


class BatchRelay(Protocol):
    """How a runtime's batch lines reach the owner's batches (a Dask worker's: `distributed`)."""

    async def request(self, line: RelayedLine) -> LineResult:
        """Send `line` to the owner and wait for its answer; a cancelled caller's line is
        withdrawn there."""
        ...


class RelayedBatcher:
    """A batcher whose lines go through `relay` (what `BatchLane.batcher` gives a runtime with a
    relay): the calls of one batch API under one set of credentials."""

    def __init__(
        self, relay: BatchRelay, wire: BatchWire, headers: dict[str, str], max_attempts: int
    ) -> None:
        self.relay = relay
        self.wire = wire
        self.headers = headers
        self.max_attempts = max_attempts

    async def request(self, line: BatchLine) -> LineResult:
        """`line`'s answer from the owner's batches (priced, counted and handed over as the
        batcher does it)."""
        wire = self.wire
        relayed = RelayedLine(
            id=line.custom_id,
            base=wire.base,
            suffix=wire.suffix,
            headers=self.headers,
            data=line.data.decode(),
        )
        line.state = State.SUBMITTED
        try:
            result = await self.relay.request(relayed)
        except BaseException:
            if line.state is State.SUBMITTED:
                line.abandon()  # the owner may have sent it: its worst case counts
                line.settle(line.worst_case())
            raise
        line.answer(result)
        return result


async def relayed_line(runtime: Runtime, line: RelayedLine) -> LineResult:
    """The answer to a relayed `line` from `runtime`'s batches (the owner's side): it joins the
    batcher of its batch API and credentials as a line of this process's own would, and is
    withdrawn if this is cancelled. A line no batch API here serves fails (`final`)."""
    from ._batch_lane import BatchLane
    from ._route import Route

    lane = BatchLane.of(runtime)
    base, suffix = line["base"], line["suffix"]
    wire = lane.wire(base, _path(base, suffix))
    if wire is None:
        return _refused(line["id"], f"no batch API serves {base}/{suffix}")
    route = Route(runtime, f"{base}/{suffix}", lane="batch")
    data = line["data"].encode()
    batcher = lane.own_batcher(route, wire, line["headers"])
    own = BatchLine(line["id"], data, route.pricing.costing(data, _body(data)), None)
    result = await batcher.request(own)
    own.settle(Decimal(0))  # holds nothing: the calling process reserved for it
    return result


def _path(base: str, suffix: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(base).path.rstrip("/") + "/" + suffix


def _body(data: bytes) -> Any:
    """The request inside a line (OpenAI's `body`, Anthropic's `params`), for its price."""
    try:
        line = json.loads(data)
    except ValueError:
        return None
    if not isinstance(line, dict):
        return None
    return line.get("body", line.get("params"))


def _refused(custom_id: str, why: str) -> LineResult:
    body = json.dumps({"error": {"message": why}}).encode()
    return LineResult(custom_id, "errored", 400, body, final=True)
