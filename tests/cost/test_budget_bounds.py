"""What bounds a call's worst case under a budget when its body alone cannot: a body that names
no model (Gemini's generateContent, a gateway's default model), server-side context (a
Responses `previous_response_id`, a built-in tool, a file by id) and answers that report more
prompt tokens than their body has bytes. Each is checked by what the provider was sent and what
the `released` events say was spent."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import Benchmark, OpenAIChatModel, Settings, Task
from asynceval.analysis import summarize
from asynceval.cli import main
from asynceval.funnel._costing import Pricing
from asynceval.interop import http_client, openai_client
from asynceval.runtime import Prices
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog
from ._support import MODEL, PRICE, Calls, events_file, price_file, released_cost, tasks

BASE = "http://fake.test/v1"


class Fake:
    """A raw ASGI provider: answers every POST with a chat completion reporting `prompt` and
    `completion` tokens (as a long server-side conversation would), GET with a model list; it
    logs every request (method, path)."""

    def __init__(self, prompt: int = 50_000, completion: int = 100, gemini: bool = False) -> None:
        self.prompt = prompt
        self.completion = completion
        self.gemini = gemini  # answer as Gemini does: usageMetadata
        self.log: list[tuple[str, str]] = []

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        self.log.append((scope["method"], scope["path"]))
        if scope["method"] == "GET":
            body: dict[str, Any] = {"object": "list", "data": [{"id": "m", "object": "model"}]}
        elif self.gemini:
            body = {
                "candidates": [{"content": {"role": "model", "parts": [{"text": "42"}]}}],
                "usageMetadata": {
                    "promptTokenCount": self.prompt,
                    "candidatesTokenCount": self.completion,
                    "thoughtsTokenCount": 50,
                },
            }
        else:
            body = {
                "id": "x",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}}],
                "usage": {"prompt_tokens": self.prompt, "completion_tokens": self.completion},
            }
        content = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    @property
    def posts(self) -> int:
        return sum(1 for method, _ in self.log if method == "POST")


class Posts(Benchmark):
    """Each repetition POSTs `body` (its `{query}` filled in) to `path` through
    `asynceval.interop.http_client()`, on `fake`."""

    def __init__(self, fake: Fake, path: str, body: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fake = fake
        self.path = path
        self.body = body

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client = http_client(transport=httpx.ASGITransport(app=self.fake))

        async def solver(query: str) -> str:
            body = json.loads(json.dumps(self.body).replace("{query}", query))
            response = await client.post(f"{BASE}/{self.path}", json=body)
            response.raise_for_status()
            return "42"

        return [solver], {}


def prices(tmp_path: Path, entries: Mapping[str, Mapping[str, Any]]) -> Settings:
    return Settings(llm_prices_file=str(price_file(tmp_path / "prices.json", entries)))


GEMINI = {
    "contents": [{"role": "user", "parts": [{"text": "{query}"}]}],
    "generationConfig": {"maxOutputTokens": 8000},
}


async def test_a_body_without_a_model_is_priced_from_its_url_and_held_to_the_budget(
    event_log: EventLog,
) -> None:
    """Gemini's generateContent names its model in the URL: priced as that model (here by
    genai-prices), its worst case (maxOutputTokens 8000) does not fit in $0.001, so nothing is
    sent and nothing spent (on 299ac72: 20 requests, 1 M tokens, "budget $0: held")."""
    fake = Fake(prompt=50_000, completion=8_000)
    bench = Posts(fake, "models/gemini-2.5-pro:generateContent", GEMINI, max_concurrent_tasks=4)
    reports = await bench.run(tasks(20), max_cost_usd=0.001)
    assert fake.posts == 0
    assert {r["status"] for r in reports} == {"budget_exhausted"}
    assert released_cost(event_log.all()) == 0


async def test_a_body_without_any_model_is_refused_under_a_budget_with_one_line(
    event_log: EventLog,
) -> None:
    """A chat completion whose body names no model (a gateway's default model) cannot be
    priced: under a budget it is refused before it is sent, its repetition's error of kind
    cost_unbounded (asynceval's refusal) with one line saying why."""
    fake = Fake()
    body = {"messages": [{"role": "user", "content": "{query}"}], "max_tokens": 10}
    bench = Posts(fake, "chat/completions", body)
    reports = await bench.run(tasks(3), max_cost_usd=1.0)
    assert fake.posts == 0
    for report in reports:
        error = report["error"]
        assert error["kind"] == "cost_unbounded" and error["type"] == "CostUnbounded"
        assert "names no model" in error["message"] and "\n" not in error["message"]
    (group,) = summarize(reports).error_kinds
    assert group["kind"] == "cost_unbounded" and "budget" in group["label"]
    assert not event_log.named("acquired")


async def test_without_a_budget_a_body_without_a_model_is_an_unpriced_call(
    event_log: EventLog,
) -> None:
    """Without a budget the call goes, and counts as unpriced (null cost, `unpriced` on its
    event, in the report's unpriced_calls), never as $0."""
    fake = Fake(prompt=50, completion=5)
    bench = Posts(fake, "models/some-model-nobody-prices-zq9:generateContent", GEMINI)
    reports = await bench.run(tasks(3))
    assert fake.posts == 3 and {r["status"] for r in reports} == {"success"}
    released = event_log.named("released")
    assert len(released) == 3
    assert all(e["unpriced"] is True and e["cost_usd"] is None for e in released)
    for report in reports:
        assert report["usage"]["unpriced_calls"] == 1 and report["usage"]["cost_usd"] is None
    assert summarize(reports).unpriced_calls == 3


async def test_a_gemini_answer_is_priced_from_its_usage_metadata(event_log: EventLog) -> None:
    """Gemini's answer says its usage in usageMetadata (its thinking tokens billed as output):
    the call is priced from it, as the model its URL names (on 299ac72: no cost at all)."""
    fake = Fake(prompt=1000, completion=100, gemini=True)
    bench = Posts(fake, "models/gemini-2.5-pro:generateContent", GEMINI)
    reports = await bench.run(tasks(2))
    assert {r["status"] for r in reports} == {"success"}
    expected = (1000 * 1.25 + 150 * 10) / 1_000_000
    for event in event_log.named("released"):
        assert event["cost_usd"] == pytest.approx(expected) and not event.get("cost_unknown")
    assert all(r["usage"]["by_model"]["gemini-2.5-pro"]["calls"] == 1 for r in reports)


async def test_requests_that_are_no_model_call_are_never_refused() -> None:
    """A GET (the model list), a POST to a path that is no model endpoint (a file upload) and
    a tool's POST to a site's `/api/messages` that holds no prompt, through the funnel under a
    budget: sent, not refused."""
    fake = Fake()

    class Other(Posts):
        async def setup_agents(self, *args: Any) -> Any:
            client = http_client(transport=httpx.ASGITransport(app=self.fake))

            async def solver(query: str) -> str:
                (await client.get(f"{BASE}/models")).raise_for_status()
                files = {"file": ("a.jsonl", b"{}\n")}
                (await client.post(f"{BASE}/files", files=files)).raise_for_status()
                tool = await client.post("http://chat.test/api/messages", json={"text": query})
                tool.raise_for_status()  # an agent's tool posting to some site: no prompt
                return "42"

            return [solver], {}

    reports = await Other(fake, "", {}).run(tasks(2), max_cost_usd=0.001)
    assert {r["status"] for r in reports} == {"success"}
    assert len(fake.log) == 6


async def test_a_count_of_a_prompts_tokens_is_no_model_call(event_log: EventLog) -> None:
    """Anthropic's messages/count_tokens names a model and bills nothing: under a budget it is
    sent even for a model without a price, and costs nothing (on 299ac72: refused)."""
    fake = Fake()
    body = {"model": "claude-unpriced-zq9", "messages": [{"role": "user", "content": "{query}"}]}
    reports = await Posts(fake, "messages/count_tokens", body).run(tasks(3), max_cost_usd=0.001)
    assert {r["status"] for r in reports} == {"success"} and fake.posts == 3
    assert released_cost(event_log.all()) == 0


PREVIOUS = {
    "model": "{model}",
    "previous_response_id": "resp_abc123",
    "input": "{query}",
    "max_output_tokens": 100,
}


def previous(model: str) -> dict[str, Any]:
    return {**PREVIOUS, "model": model}


async def test_server_side_context_is_reserved_at_the_context_window(
    tmp_path: Path, event_log: EventLog
) -> None:
    """`previous_response_id`: the provider bills 50,000 prompt tokens for a body of 150
    bytes. Reserved at the model's context window (60,000 tokens, from its price file entry),
    what the released events say was spent stays within $0.05 (on 299ac72: 20 calls, $0.1)."""
    fake = Fake(prompt=50_000, completion=100)
    settings = prices(
        tmp_path,
        {"ctx-model": {"input_mtok": 0.1, "output_mtok": 0.4, "context_window": 60_000}},
    )
    bench = Posts(fake, "responses", previous("ctx-model"), settings=settings)
    bench.max_concurrent_tasks = 4
    await bench.run(tasks(20), max_cost_usd=0.05)
    spent = released_cost(event_log.all())
    assert 0 < spent <= 0.05 and 5 <= fake.posts < 20


async def test_server_side_context_for_a_real_model_fits_no_small_budget(
    event_log: EventLog,
) -> None:
    """The review's case: gpt-4o (its 128k context window from genai-prices) with a previous
    response id under $0.05: its worst case ($0.32) never fits, nothing is sent (on 299ac72:
    $0.504 spent)."""
    fake = Fake(prompt=50_000, completion=100)
    bench = Posts(fake, "responses", previous("gpt-4o"), max_concurrent_tasks=4)
    reports = await bench.run(tasks(20), max_cost_usd=0.05)
    assert fake.posts == 0 and released_cost(event_log.all()) == 0
    assert {r["status"] for r in reports} == {"budget_exhausted"}


async def test_server_side_context_without_a_context_window_is_refused_naming_the_key(
    tmp_path: Path,
) -> None:
    """A model whose context window nobody knows: refused under a budget, the one line naming
    the price file's `context_window`."""
    fake = Fake()
    settings = prices(tmp_path, {MODEL: PRICE})
    bench = Posts(fake, "responses", previous(MODEL), settings=settings)
    reports = await bench.run(tasks(2), max_cost_usd=1.0)
    assert fake.posts == 0
    for report in reports:
        assert report["error"]["kind"] == "cost_unbounded"
        message = report["error"]["message"]
        assert "previous_response_id" in message and "context_window" in message
        assert "LLM_PRICES_FILE" in message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"previous_response_id": "r"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "stored prompt"),
        ({"tools": [{"type": "web_search"}]}, "web_search"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "web_search"),
        ({"tools": [{"googleSearch": {}}]}, "googleSearch"),
        ({"cachedContent": "cachedContents/1"}, "cachedContent"),
        ({"input": [{"content": [{"type": "input_file", "file_id": "f"}]}]}, "file_id"),
        (
            {"messages": [{"content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}]},
            "image given by URL",
        ),
        ({"contents": [{"parts": [{"fileData": {"fileUri": "gs://a"}}]}]}, "fileData"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "content": [{"type": "image", "source": {"type": "url"}}],
                            }
                        ],
                    }
                ]
            },
            "image given by URL or file",
        ),
    ],
)
def test_what_counts_as_server_side_context(body: dict[str, Any], reason: str) -> None:
    from asynceval.funnel._costing import server_context

    assert reason in (server_context(body) or "")


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        {"tools": [{"name": "f", "input_schema": {"type": "object"}}]},
        {"tools": [{"functionDeclarations": [{"name": "f"}]}]},
        {"messages": [{"content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]},
    ],
)
def test_what_the_body_bounds(body: dict[str, Any]) -> None:
    from asynceval.funnel._costing import server_context

    assert server_context(body) is None


def test_declared_tools_add_an_allowance_to_the_prompt_bound() -> None:
    """A provider adds a system prompt for tools (Anthropic's: about 350 tokens): the bound
    is the body's bytes plus `TOOLS_ALLOWANCE`."""
    from asynceval.funnel._costing import TOOLS_ALLOWANCE

    pricing = Pricing(Prices({MODEL: PRICE}), None)
    plain = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    tools = {**plain, "tools": [{"name": "f", "input_schema": {"type": "object"}}]}
    for body, extra in ((plain, 0), (tools, TOOLS_ALLOWANCE)):
        content = json.dumps(body).encode()
        costing = pricing.costing(content, body)
        assert costing is not None and costing.prompt_bound == len(content) + extra


def test_a_price_files_limits_are_checked() -> None:
    with pytest.raises(Exception, match="context_window is a number of tokens"):
        Prices({MODEL: {**PRICE, "context_window": 0}})
    price = Prices({MODEL: {**PRICE, "context_window": 1000, "max_output_tokens": 50}})
    found = price.price(MODEL, lane="batch")
    assert found is not None and found.context_window == 1000 and found.max_output_tokens == 50


async def test_tokens_per_byte_above_one_never_take_spend_over_the_budget(
    event_log: EventLog,
) -> None:
    """The simulator counting 20 tokens a character: each answer reports far more prompt
    tokens than its body has bytes. The first request goes alone; its answer raises the
    model's tokens per byte, so the next requests reserve enough: what was spent stays within
    the budget (on 299ac72: $0.00276 of $0.002), and the budget reports the first one's
    overrun."""
    sim = SimConfig(latency=0.02, tokens_per_char=20)
    bench = Calls("asynceval-sim", params={"max_tokens": 4}, sim=sim, max_concurrent_tasks=10)
    short = [Task(query=f"What is {i} + 3?", id=f"t{i}") for i in range(40)]
    await bench.run(short, max_cost_usd=0.002)
    spent = released_cost(event_log.all())
    assert 0 < spent <= 0.002 and bench.sim_stats()["requests"] >= 2


def test_the_reviews_arithmetic_run_at_20_tokens_a_character_stays_in_budget(
    tmp_path: Path, asgi_server: Callable[[Any], int], capsys: pytest.CaptureFixture[str]
) -> None:
    """`asynceval run examples/arithmetic.py --max-cost 0.002` against a simulator counting 20
    tokens a character: the released events add up to no more than $0.002 (on 299ac72:
    $0.00272, `logs check` VIOLATED)."""
    url = f"http://127.0.0.1:{asgi_server(SimProvider(SimConfig(tokens_per_char=20)))}/v1"
    out = tmp_path / "run"
    example = str(Path(__file__).parents[2] / "examples" / "arithmetic.py")
    argv = ["run", example, "--out", str(out), "--quiet", "--max-cost", "0.002"]
    assert main([*argv, "--base-url", url, "--model", "asynceval-sim"]) == 3
    spent = released_cost(events_file(out / "events.jsonl"))
    assert 0 < spent <= 0.002


async def test_the_learned_ratio_lets_calls_run_in_parallel_after_the_first(
    event_log: EventLog,
) -> None:
    """Once the first answer has said, requests go in parallel again, reserved at the ratio
    learned (a budget large enough for all of them: every one sent, spend within it)."""
    sim = SimConfig(latency=0.05, tokens_per_char=20)
    bench = Calls("asynceval-sim", params={"max_tokens": 8}, sim=sim, max_concurrent_tasks=10)
    reports = await bench.run(tasks(20), max_cost_usd=1.0)
    assert {r["status"] for r in reports} == {"success"}
    stats = bench.sim_stats()
    assert stats["requests"] == 20 and stats["max_in_flight"] >= 5
    assert bench.budget is not None and released_cost(event_log.all()) <= 1.0


class SdkUnpriced(Benchmark):
    """The run's model is priced, but the agent's SDK call names a model with no price."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        OpenAIChatModel("asynceval-sim")  # the priced model the run is about
        client: openai.AsyncOpenAI = openai_client()

        async def solver(query: str) -> str:
            answer = await client.chat.completions.create(
                model="my-local-llama-zq9",
                messages=[{"role": "user", "content": query}],
                max_tokens=10,
            )
            return answer.choices[0].message.content or ""

        return [solver], {}


async def test_an_sdk_call_to_an_unpriced_model_is_asyncevals_refusal_not_the_agents() -> None:
    """Under a budget, an SDK call to a model without a price is refused by asynceval: its
    repetitions' error kind is cost_unbounded, labelled as the budget's refusal naming
    LLM_PRICES_FILE (on 299ac72: "your agent raised: ConfigError")."""
    reports = await SdkUnpriced().run(tasks(3), max_cost_usd=0.01)
    for report in reports:
        assert report["error"]["kind"] == "cost_unbounded"
        assert "LLM_PRICES_FILE" in report["error"]["message"]
    (group,) = summarize(reports).error_kinds
    assert group["count"] == 3 and group["label"] != "your agent raised"


def test_cost_unbounded_is_a_config_error() -> None:
    from asynceval.errors import CostUnbounded

    assert issubclass(CostUnbounded, ValueError)


LONG = """
from asynceval import Benchmark, OpenAIChatModel, Task


class Long(Benchmark):
    def default_tasks(self):
        return [Task(query="Say yes. " * 25 + str(i), id=f"t{i}") for i in range(5)]

    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel(settings=self.settings)

        async def solver(query):
            return (await model.generate(query, max_tokens=1)).text

        return [solver], {}


benchmark = Long
"""


def test_a_run_whose_first_answer_goes_over_the_budget_says_by_how_much(
    tmp_path: Path, asgi_server: Callable[[Any], int], capsys: pytest.CaptureFixture[str]
) -> None:
    """The one request a bound cannot see (the first of a model, at 20 tokens a character:
    $0.004 for a reservation of $0.0003) takes the spending over a $0.001 budget: the run says
    "budget exceeded by $X" with the released events' excess, and sends nothing more."""
    url = f"http://127.0.0.1:{asgi_server(SimProvider(SimConfig(tokens_per_char=20)))}/v1"
    target = tmp_path / "long.py"
    target.write_text(LONG, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["run", str(target), "--out", str(out), "--quiet", "--max-cost", "0.001"]
    assert main([*argv, "--base-url", url, "--model", "asynceval-sim"]) == 3
    spent = released_cost(events_file(out / "events.jsonl"))
    err = capsys.readouterr().err
    assert spent > Decimal("0.001")
    assert f"budget exceeded by ${float(spent - Decimal('0.001')):.6g}" in err, err
    assert main(["logs", "check", str(out)]) != 0
    checked = capsys.readouterr().out
    assert f"EXCEEDED by ${float(spent - Decimal('0.001')):.6g}" in checked, checked


class StreamThenCall(Benchmark):
    """Opens a stream (the model's first request), then makes a second call before reading it:
    the second must not wait for the first's answer, which only its own reading brings."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client: openai.AsyncOpenAI = openai_client(base_url=self.url)

        async def solver(query: str) -> str:
            messages = [{"role": "user", "content": query}]
            stream = await client.chat.completions.create(
                model="asynceval-sim", messages=messages, max_tokens=8, stream=True
            )
            other = await client.chat.completions.create(
                model="asynceval-sim", messages=messages, max_tokens=8
            )
            chunks = [chunk async for chunk in stream]
            return f"{len(chunks)} {other.choices[0].message.content}"

        return [solver], {}


async def test_a_stream_read_later_does_not_hold_back_its_readers_next_call(
    asgi_server: Callable[[Any], int],
) -> None:
    """Until a model's first answer, a budget lets one request of it out at a time; a stream
    stops holding that turn once its caller has it (its reader may be the next caller)."""
    url = f"http://127.0.0.1:{asgi_server(SimProvider(SimConfig(latency=0.01)))}/v1"
    with anyio.fail_after(20):
        reports = await StreamThenCall(url).run(tasks(2), max_cost_usd=1.0)
    assert {r["status"] for r in reports} == {"success"}
