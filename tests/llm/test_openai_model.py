"""OpenAIChatModel over the in-process simulated provider: the real client code, end to end."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from asynceval import LLMCallFailed, OpenAIChatModel, Settings
from asynceval.errors import MalformedResponse, ProviderConnectionError, ProviderError
from asynceval.limits import ConcurrencyController
from asynceval.llm import track_usage
from asynceval.sim import SimConfig

from ..conftest import EventLog

FAST_RETRY: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}


def model_for(sim: SimConfig, limit: int = 5, **settings: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        settings=Settings(**{**FAST_RETRY, **settings}),
        controller=ConcurrencyController(limit),
        sim_config=sim,
    )


async def test_chat_answers_arithmetic_and_reports_usage() -> None:
    async with model_for(SimConfig(latency=0)) as model:
        completion = await model.generate("What is 17 + 25?")
    assert completion.text == "42"
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.finish_reason == "stop" and completion.model == "asynceval-sim"


class Verdict(BaseModel):
    score: float
    argument: str


async def test_json_schema_passes_through_and_parses() -> None:
    schema = {
        "type": "object",
        "properties": {
            "opinions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "criterion_id": {"type": "string", "enum": ["a", "b", "c"]},
                        "score": {"type": "number"},
                    },
                    "required": ["criterion_id", "score"],
                },
            }
        },
        "required": ["opinions"],
    }
    async with model_for(SimConfig(latency=0)) as model:
        batched = await model.generate(
            "Judge.",
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        )
        single = await model.generate("Judge.", response_format=Verdict)
    assert sorted(o["criterion_id"] for o in batched.json()["opinions"]) == ["a", "b", "c"]
    assert Verdict.model_validate_json(single.text).argument


async def test_tool_calls_are_parsed_then_answered() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look a city up.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    async with model_for(SimConfig(latency=0)) as model:
        first = await model.generate("Where is Paris?", tools=tools)
        (call,) = first.tool_calls
        assert call.name == "lookup" and isinstance(call.arguments["city"], str)
        second = await model.generate(
            [
                {"role": "user", "content": "Where is Paris?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.raw_arguments},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call.id, "content": "France"},
            ],
            tools=tools,
        )
    assert second.tool_calls == () and "France" in second.text


@pytest.mark.slow
async def test_retry_after_on_every_first_attempt_is_honoured(event_log: EventLog) -> None:
    """Each request's first attempt gets 429 + Retry-After: 1; every call then succeeds."""
    sim = SimConfig(latency=0.01, fail_first=1, retry_after=1.0)
    async with model_for(sim, retry_max_delay=60.0) as model:
        async with anyio.create_task_group() as tg:
            for index in range(10):
                tg.start_soon(model.generate, f"question {index}")
        stats = model.sim.stats()  # type: ignore[union-attr]
    retries = event_log.named("retry")
    assert len(retries) == 10
    assert all(r["status_code"] == 429 and r["delay_s"] >= 1.0 for r in retries)
    assert stats["statuses"] == {"429": 10, "200": 10}
    assert not event_log.named("llm_call_failed")


async def test_always_503_makes_exactly_max_attempts_then_fails(event_log: EventLog) -> None:
    model = model_for(SimConfig(latency=0, fault_rates={503: 1.0}, retry_after=0.01))
    async with model:
        started = anyio.current_time()
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi", agent="judge", dimension="accuracy")
        assert model.sim.stats()["requests"] == 3  # type: ignore[union-attr]
    error = info.value
    assert (error.status_code, error.attempts, error.retryable) == (503, 3, True)
    assert (error.agent, error.dimension) == ("judge", "accuracy")
    assert 0 < error.elapsed_s <= anyio.current_time() - started
    (failed,) = event_log.named("llm_call_failed")
    assert failed["level"] == "ERROR" and failed["status_code"] == 503 and failed["attempts"] == 3
    assert failed["agent"] == "judge" and failed["dimension"] == "accuracy"
    assert [r["attempt"] for r in event_log.named("retry")] == [1, 2]


async def test_hanging_provider_times_out_each_attempt_and_frees_slots(
    event_log: EventLog,
) -> None:
    controller = ConcurrencyController(2)
    model = OpenAIChatModel(
        settings=Settings(llm_call_timeout=0.3, **FAST_RETRY),
        controller=controller,
        sim_config=SimConfig(hang_rate=1.0),
    )
    async with model:
        with anyio.fail_after(5):
            with pytest.raises(LLMCallFailed) as info:
                await model.generate("hello?")
        assert model.sim.stats()["in_flight"] == 0  # type: ignore[union-attr]
    assert info.value.status_code is None and info.value.attempts == 3
    timeouts = event_log.named("timeout")
    assert len(timeouts) == 3 and all(t["timeout_s"] == 0.3 for t in timeouts)
    assert controller.statistics().active == 0
    assert len(event_log.named("acquired")) == len(event_log.named("released")) == 3


async def test_malformed_and_truncated_bodies_are_retried_not_crashes() -> None:
    sim = SimConfig(latency=0, malformed_rate=0.3, truncated_rate=0.3, seed=3)
    async with model_for(sim, retry_max_attempts=8) as model:
        with track_usage() as usage:
            async with anyio.create_task_group() as tg:
                for index in range(30):
                    tg.start_soon(model.generate, f"q{index}")
    assert usage.llm_calls == 30 and usage.failed_calls == 0 and usage.retries > 5


async def test_always_malformed_fails_with_the_cause() -> None:
    async with model_for(SimConfig(latency=0, malformed_rate=1.0)) as model:
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi")
    assert isinstance(info.value.__cause__, MalformedResponse) and info.value.attempts == 3


@pytest.mark.parametrize("status", [400, 401, 404])
async def test_non_retryable_status_fails_at_once_with_provider_message(status: int) -> None:
    async with model_for(SimConfig(latency=0, fault_rates={status: 1.0})) as model:
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi")
        assert model.sim.stats()["requests"] == 1  # type: ignore[union-attr]
    assert info.value.attempts == 1 and info.value.status_code == status
    assert info.value.retryable is False and info.value.message


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_connection_refused_is_retried_then_fails(transport: Any) -> None:
    model = OpenAIChatModel(
        "m",
        base_url="http://127.0.0.1:9/v1",
        settings=Settings(**FAST_RETRY),
        controller=ConcurrencyController(1),
        transport=transport,
    )
    async with model:
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi")
    assert info.value.attempts == 3 and info.value.status_code is None
    assert isinstance(info.value.__cause__, ProviderConnectionError)


async def test_cancelled_during_backoff_holds_no_slot(event_log: EventLog) -> None:
    controller = ConcurrencyController(3)
    model = OpenAIChatModel(
        settings=Settings(retry_initial_delay=0.5, retry_max_delay=1.0, retry_max_attempts=5),
        controller=controller,
        sim_config=SimConfig(latency=0, fault_rates={503: 1.0}, retry_after=0),
    )
    async with model:
        with anyio.move_on_after(0.2) as scope:
            async with anyio.create_task_group() as tg:
                for index in range(6):
                    tg.start_soon(model.generate, f"q{index}")
    assert scope.cancelled_caught
    assert len(event_log.named("retry")) == 6  # all six are asleep in backoff when cancelled
    assert controller.statistics().active == 0 and controller.statistics().waiting == 0
    assert len(event_log.named("acquired")) == len(event_log.named("released")) == 6


async def test_usage_is_counted_through_the_context() -> None:
    async with model_for(SimConfig(latency=0, fail_first=1, retry_after=0)) as model:
        with track_usage() as usage:
            await model.generate("What is 2 * 3?")
            await model.generate("What is 2 * 4?")
    assert (usage.llm_calls, usage.retries, usage.failed_calls) == (2, 2, 0)
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


async def test_api_key_never_reaches_the_event_log(event_log: EventLog) -> None:
    secret = "sk-test-never-log-me-0123456789"
    model = OpenAIChatModel(
        settings=Settings(**FAST_RETRY),
        api_key=secret,
        controller=ConcurrencyController(2),
        sim_config=SimConfig(latency=0, fault_rates={503: 0.5, 401: 0.2}, seed=5),
    )
    async with model:
        for index in range(10):
            with contextlib.suppress(LLMCallFailed):
                await model.generate(f"q{index}")
    text = event_log.stream.getvalue()
    assert event_log.named("retry") and secret not in text
    assert secret not in repr(model)


def test_a_base_url_without_a_model_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"no model name .* pass model= or set LLM_MODEL"):
        OpenAIChatModel(base_url="http://127.0.0.1:9/v1")


async def test_2000_calls_cancelled_at_random_leave_no_slot_held(event_log: EventLog) -> None:
    """Cancellations land while queued, while holding a slot and while sleeping in backoff."""
    import random

    controller = ConcurrencyController(5)
    model = OpenAIChatModel(
        settings=Settings(retry_initial_delay=0.001, retry_max_delay=0.01, retry_max_attempts=4),
        controller=controller,
        sim_config=SimConfig(latency=0.001, fault_rates={503: 0.4}, retry_after=0, seed=11),
    )
    rng = random.Random(3)
    cancelled = 0

    async def call(index: int, deadline: float) -> None:
        nonlocal cancelled
        with anyio.move_on_after(deadline) as scope:
            with contextlib.suppress(LLMCallFailed):
                await model.generate(f"q{index}")
        cancelled += scope.cancelled_caught

    async with model:
        async with anyio.create_task_group() as tg:
            for index in range(2000):
                tg.start_soon(call, index, rng.uniform(0, 1.0))
        assert model.sim.stats()["in_flight"] == 0  # type: ignore[union-attr]
    stats = controller.statistics()
    assert (stats.active, stats.waiting) == (0, 0)
    assert 100 < cancelled < 1900
    acquired = [e["call_id"] for e in event_log.named("acquired")]
    released = [e["call_id"] for e in event_log.named("released")]
    assert sorted(acquired) == sorted(released)  # every slot taken was given back
    assert event_log.named("retry")  # some calls were in backoff
    assert event_log.max_in_flight() <= 5


async def test_requests_per_minute_limit_applies_to_model_calls() -> None:
    from asynceval.limits import RateLimiter

    limiter = RateLimiter(requests_per_minute=20, window_s=0.5, margin_s=0.05)  # 20 in any 0.5 s
    model = OpenAIChatModel(
        controller=ConcurrencyController(50), rate_limiter=limiter, sim_config=SimConfig(latency=0)
    )
    async with model:
        async with anyio.create_task_group() as tg:
            for index in range(20):
                tg.start_soon(model.generate, f"q{index}")
        started = anyio.current_time()
        await model.generate("one more")
        waited = anyio.current_time() - started
    assert waited >= 0.4


async def test_generate_with_stream_true_is_refused_before_anything_is_sent() -> None:
    from asynceval.errors import ConfigError

    async with model_for(SimConfig(latency=0)) as model:
        with pytest.raises(ConfigError, match="does not stream"):
            await model.generate("What is 1 + 1?", stream=True)
        assert model.sim is not None and model.sim.stats()["requests"] == 0


async def test_a_call_that_fails_for_good_chains_only_its_last_failure() -> None:
    """The retries run outside the first attempt's handler: the last failure (the
    LLMCallFailed's cause) is not chained to the first, so a report's traceback shows one."""
    model = OpenAIChatModel(
        settings=Settings(retry_max_attempts=3, retry_initial_delay=0.01, retry_max_delay=0.02),
        controller=ConcurrencyController(2),
        sim_config=SimConfig(latency=0, fault_rates={503: 1.0}),
    )
    async with model:
        with pytest.raises(LLMCallFailed) as failed:
            await model.generate("x")
    last = failed.value.__cause__
    assert isinstance(last, ProviderError) and last.status_code == 503
    assert last.__context__ is None and last.__cause__ is None


async def test_a_client_turning_the_deadline_into_its_own_timeout_error_is_a_timeout(
    event_log: EventLog,
) -> None:
    """A client that answers our deadline's cancellation with a TimeoutError of its own: the
    attempt still timed out (its `timeout` event, a retryable failure), as with fail_after."""
    from asynceval.funnel import Gateway
    from asynceval.limits import RetryPolicy

    async def attempt(lease: Any) -> str:
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            raise TimeoutError("the client's own timeout") from None
        return "never"

    gateway = Gateway(
        controller=ConcurrencyController(1),
        retry_policy=RetryPolicy.from_settings(Settings(retry_max_attempts=1)),
        call_timeout=0.05,
    )
    with anyio.fail_after(5), pytest.raises(LLMCallFailed) as failed:
        await gateway.call(attempt, usage_of=lambda result: None)
    assert failed.value.retryable
    assert [e["timeout_s"] for e in event_log.named("timeout")] == [0.05]
