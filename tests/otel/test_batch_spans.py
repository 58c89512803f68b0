"""Calls of the batch lane have their spans too (lane `batch`): a child of their repetition's
span, with the answer's tokens and its cost at the batch price, and a line sent again in a
later batch as a retry event."""

from __future__ import annotations

import pytest

from asynceval import OpenAIChatModel, Task
from asynceval.sim import SimConfig
from asynceval.telemetry import REPETITION_SPAN, RETRY_EVENT

from .conftest import FAST, Ask, Recorded

BATCH = FAST.model_copy(
    update={"llm_lane": "batch", "llm_batch_linger": 0.1, "llm_batch_poll": 0.02}
)
TASKS = [Task(id=f"t{i}", query=f"what is {i}+1?") for i in range(4)]


async def test_a_batch_lines_call_is_a_chat_span_of_its_repetition(recorded: Recorded) -> None:
    bench = Ask(settings=BATCH)
    sim = SimConfig(latency=0.0, batch_delay=0.02)
    bench.model = OpenAIChatModel(sim_config=sim)  # asynceval-sim: the simulator's priced model
    reports = await bench.run(TASKS)
    repetitions = {s.context.span_id: s for s in recorded.spans(REPETITION_SPAN)}
    calls = recorded.spans("chat asynceval-sim")
    assert len(repetitions) == 4 and len(calls) == 4
    for call in calls:
        assert call.parent is not None and call.parent.span_id in repetitions
        a = call.attributes
        assert a["asynceval.lane"] == "batch"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.model"] == "asynceval-sim"
        assert "error.type" not in a
    # at the batch price: what the reports count (half of live)
    spent = sum(call.attributes["asynceval.cost_usd"] for call in calls)
    assert spent == pytest.approx(sum(r["usage"]["cost_usd"] for r in reports)) and spent > 0


async def test_lines_sent_again_are_retry_events_and_the_last_failure_its_error(
    recorded: Recorded,
) -> None:
    """Every line expires: the call sends it in a later batch twice more (RETRY_MAX_ATTEMPTS
    is 3), each a retry event, then fails: its span says so."""
    sim = SimConfig(latency=0.0, batch_delay=0.02, batch_expire_rate=1.0)
    [report] = await Ask(sim, settings=BATCH).run(TASKS[:1])
    assert report["status"] != "success"
    [call] = recorded.spans("chat sim-model")
    assert len([e for e in call.events if e.name == RETRY_EVENT]) == 2
    assert call.attributes["asynceval.attempts"] == 3
    assert call.attributes["error.type"]
    assert call.status.status_code.name == "ERROR"
