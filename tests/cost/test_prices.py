"""A run's costs are its tokens times its prices: per request on `released`, per repetition in
the report's usage, per run in `run_finished`; a price file (JSON or YAML), `price=` on a model
ahead of it, and cached prompt tokens at their own rate (OpenAI's and Anthropic's usage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval import AnthropicChatModel, OpenAIChatModel, Settings, Task

from ..conftest import EventLog
from ._support import MODEL, PRICE, Calls, by_repetition, exact, price_file, tasks, token_cost


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
async def test_each_request_costs_its_tokens_at_the_price_files_price(
    tmp_path: Path, event_log: EventLog, suffix: str
) -> None:
    """Per request: cost_usd == prompt x input + completion x output (the report's tokens of
    that one call); per repetition the report's cost_usd; per run the sum of the reports."""
    prices = price_file(tmp_path / f"prices{suffix}", {MODEL: PRICE})
    bench = Calls(settings=Settings(llm_prices_file=str(prices)))
    reports = await bench.run(tasks(6))
    assert {r["status"] for r in reports} == {"success"}
    released = by_repetition(event_log.all())
    for report in reports:
        usage = report["usage"]
        (event,) = released[(report["task_id"], report["repeat_idx"])]
        assert usage["completion_tokens"] == 16 and usage["prompt_tokens"] > 0
        expected = token_cost(PRICE, usage["prompt_tokens"], usage["completion_tokens"])
        assert event["cost_usd"] == expected and "unpriced" not in event
        assert "cost_unknown" not in event
        assert usage["cost_usd"] == expected and usage["unpriced_calls"] == 0
        assert usage["by_model"] == {MODEL: {"calls": 1, "cost_usd": expected}}
    (finished,) = event_log.named("run_finished")
    assert finished["cost_usd"] == float(exact(r["usage"]["cost_usd"] for r in reports))
    assert finished["unpriced_calls"] == 0 and "budget_usd" not in finished


async def test_a_repetitions_cost_is_the_sum_of_its_requests(
    tmp_path: Path, event_log: EventLog
) -> None:
    """Three calls a repetition, of different lengths: the report's cost_usd is what its three
    `released` events add up to, and what its summed tokens cost (prices are per token)."""
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    bench = Calls(calls=3, params={"max_tokens": 7}, settings=Settings(llm_prices_file=str(prices)))
    reports = await bench.run(tasks(4))
    released = by_repetition(event_log.all())
    for report in reports:
        usage = report["usage"]
        events = released[(report["task_id"], report["repeat_idx"])]
        assert len(events) == 3 and usage["llm_calls"] == 3
        assert usage["cost_usd"] == float(exact(e["cost_usd"] for e in events))
        assert usage["cost_usd"] == token_cost(
            PRICE, usage["prompt_tokens"], usage["completion_tokens"]
        )
    (finished,) = event_log.named("run_finished")
    assert finished["cost_usd"] == float(exact(r["usage"]["cost_usd"] for r in reports))


async def test_a_models_own_price_beats_the_price_file(tmp_path: Path, event_log: EventLog) -> None:
    own = {"input_mtok": 3.0, "output_mtok": 11.0}
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    bench = Calls(price=own, settings=Settings(llm_prices_file=str(prices)))
    (report,) = await bench.run(tasks(1))
    usage = report["usage"]
    expected = token_cost(own, usage["prompt_tokens"], usage["completion_tokens"])
    assert usage["cost_usd"] == expected
    (event,) = event_log.named("released")
    assert event["cost_usd"] == expected


async def test_the_simulators_model_has_its_documented_price(event_log: EventLog) -> None:
    """asynceval-sim: $1 per million prompt tokens, $2 per million completion tokens."""
    bench = Calls("asynceval-sim")
    reports = await bench.run(tasks(3))
    for report in reports:
        usage = report["usage"]
        assert usage["cost_usd"] == token_cost(
            {"input_mtok": 1.0, "output_mtok": 2.0},
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )


def openai_answer(prompt: int, cached: int, completion: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "42"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def anthropic_answer(fresh: int, read: int, written: int, output: int) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "42"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": fresh,
            "output_tokens": output,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        },
    }


def answering(body: dict[str, Any]) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(200, json=body))


class Cached(Calls):
    """One call a repetition to a provider (a transport double) whose usage says how many
    prompt tokens came from its prompt cache."""

    def __init__(self, model: OpenAIChatModel | AnthropicChatModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fixed = model

    def make_model(self) -> Any:
        return self.fixed


async def test_cached_prompt_tokens_cost_the_cache_read_price(
    tmp_path: Path, event_log: EventLog
) -> None:
    """OpenAI: 1000 prompt tokens of which 600 cached, 50 completion tokens."""
    prices = price_file(tmp_path / "prices.yaml", {MODEL: PRICE})
    model = OpenAIChatModel(
        MODEL,
        base_url="http://provider.test/v1",
        transport=answering(openai_answer(1000, 600, 50)),
    )
    bench = Cached(model, settings=Settings(llm_prices_file=str(prices)))
    (report,) = await bench.run([Task(query="q", id="a")])
    usage = report["usage"]
    expected = token_cost(PRICE, 1000, 50, cached=600)
    assert (usage["prompt_tokens"], usage["cached_tokens"]) == (1000, 600)
    assert usage["cost_usd"] == expected
    assert expected < token_cost(PRICE, 1000, 50)  # the cached ones at the cheaper rate
    (event,) = event_log.named("released")
    assert event["cost_usd"] == expected


async def test_anthropic_cache_reads_and_writes_cost_their_own_prices(
    tmp_path: Path, event_log: EventLog
) -> None:
    """Anthropic counts cache tokens apart from input_tokens: 100 fresh, 700 read from the cache,
    200 written to it, 30 output tokens; each kind at its price."""
    rates = {**PRICE, "cache_write_mtok": 0.5}
    prices = price_file(tmp_path / "prices.json", {MODEL: rates})
    model = AnthropicChatModel(
        MODEL,
        base_url="http://provider.test/v1",
        api_key="k",
        transport=answering(anthropic_answer(100, 700, 200, 30)),
    )
    bench = Cached(model, settings=Settings(llm_prices_file=str(prices)))
    (report,) = await bench.run([Task(query="q", id="a")])
    usage = report["usage"]
    assert (usage["prompt_tokens"], usage["cached_tokens"]) == (1000, 700)
    expected = token_cost(rates, 1000, 30, cached=700, written=200)
    assert usage["cost_usd"] == expected
    (event,) = event_log.named("released")
    assert event["cost_usd"] == expected
