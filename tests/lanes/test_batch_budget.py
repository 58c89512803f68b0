"""The batch lane under a budget: each line holds its worst case until its batch is collected,
so a batch holds as many lines as what is left of the budget holds worst cases, and no fewer
(the first request of a model does not go alone here, as a live one does: a batch round trip
is hours). Counted by the simulated provider's own batch API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from asynceval import Benchmark, OpenAIChatModel, Runtime, Settings, Task
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog
from ..cost._support import released_cost


class OneCall(Benchmark):
    """One call a repetition, with `max_tokens` when given."""

    def __init__(self, model: OpenAIChatModel, max_tokens: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.params = {} if max_tokens is None else {"max_tokens": max_tokens}

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: str) -> str:
            return (await self.model.generate(query, **self.params)).text

        return [agent], {}


async def batch_sizes(
    max_tokens: int | None, budget: float, event_log: EventLog, **settings: Any
) -> list[int]:
    sim = SimProvider(SimConfig(batch_delay=0.05))
    model = OpenAIChatModel(
        "asynceval-sim",
        base_url="http://sim.test/v1",
        api_key="sk-batch",
        transport=httpx.ASGITransport(app=sim),
    )
    lane = Settings(llm_lane="batch", llm_batch_linger=0.2, llm_batch_poll=0.02, **settings)
    tasks = [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(60)]
    async with Runtime(lane):
        bench = OneCall(model, max_tokens, max_concurrent_tasks=120, settings=lane)
        await bench.run(tasks, max_cost_usd=budget)
    events = event_log.all()
    assert released_cost(events) <= budget  # what the batches' lines cost, within the budget
    counts = sim.stats()["batches"]["openai"]
    sizes = [e["requests"] for e in events if e["event"] == "batch_submitted"]
    assert counts["created"] == len(sizes) and counts["lines"] == sum(sizes)
    return sizes


async def test_a_budget_that_holds_many_worst_cases_makes_full_batches(event_log: EventLog) -> None:
    """max_tokens=8: a line's worst case is about $0.00006, so $0.001 holds 14-16 of them: 60
    calls go in 4-5 batches."""
    sizes = await batch_sizes(8, 0.001, event_log)
    assert sum(sizes) == 60 and len(sizes) <= 5 and max(sizes) >= 14


async def test_without_max_tokens_a_batch_holds_what_the_budget_holds(event_log: EventLog) -> None:
    """No max_tokens: each line reserves the simulator's whole output limit (256 tokens,
    $0.00033 at the batch price), so $0.001 holds 3 lines at once: the first batch has 3."""
    sizes = await batch_sizes(None, 0.001, event_log)
    assert sizes[0] == 3 and max(sizes) == 3


async def test_a_models_output_limit_in_the_price_file_bounds_each_lines_worst_case(
    event_log: EventLog, tmp_path: Path
) -> None:
    """Without max_tokens, `max_output_tokens` in the model's price file entry (the most it
    answers: a bound the user sets, and the budget trusts) makes a line's worst case $0.00009
    instead of $0.00033: batches of 10 lines, not 3 (on 299ac72 the key is refused)."""
    prices = tmp_path / "prices.json"
    entry = {"input_mtok": 1, "output_mtok": 2, "max_output_tokens": 16}
    entry["batch"] = {"input_mtok": 0.5, "output_mtok": 1}
    prices.write_text(json.dumps({"asynceval-sim": entry}), encoding="utf-8")
    sizes = await batch_sizes(None, 0.001, event_log, llm_prices_file=str(prices))
    assert sizes[0] >= 9 and len(sizes) <= 12 and sum(sizes) == 60
