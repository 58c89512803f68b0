"""A lease frees its slot on every path: a step of its release that raises (ending a stream at
the provider, settling its rate windows) must not keep the slot held."""

from __future__ import annotations

import pytest

from asynceval.funnel._costing import Costing
from asynceval.funnel._lease import Lease
from asynceval.limits import ConcurrencyController


async def test_a_release_whose_first_step_raises_still_frees_the_slot() -> None:
    controller = ConcurrencyController(1)
    slot = controller.slot(call_id="c1")
    await slot.__aenter__()
    lease = Lease(slot, None, None, Costing("m", None, 10, 16, None))

    def broken() -> None:
        raise RuntimeError("the stream's end failed")

    lease._unsend = broken
    with pytest.raises(RuntimeError, match="the stream's end failed"):
        lease.release()
    stats = controller.statistics()
    assert (stats.active, stats.waiting) == (0, 0)
    assert lease.release() is False  # once only
