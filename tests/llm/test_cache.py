"""The model-call cache: an identical second run sends nothing (the provider's own counters say
so), reports the hits in usage and events and gives the same results; our models and the interop
transports alike (streams too); entries never mix between base URLs, never hold the key, stay
whole with concurrent writers; a refusing disk never fails a call; who asks (API key,
organisation, custom headers) is part of the key."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval import Benchmark, OpenAIChatModel, Runtime, Settings, Task
from asynceval.interop import openai_client
from asynceval.runtime import CachedAnswer, CallCache

from ..conftest import EventLog

SECRET = "sk-test-cachekey-0123456789abcdef"


def entries(cache: Path) -> int:
    """The entries in a cache folder's store."""
    return CallCache(cache).stats().entries


def on_disk(cache: Path) -> bytes:
    """Every byte of every file in a cache folder (the store and SQLite's files beside it)."""
    return b"".join(p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file())


def served(base_url: str) -> int:
    """The provider's own count of requests it answered."""
    stats = httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=5).json()
    return int(stats["requests"])


class Sums(Benchmark):
    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel("sim", base_url=self.base_url, api_key=SECRET)

        async def solver(query: Any) -> str:
            return (await model.generate(query, agent="solver")).text

        return [solver], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        def exact(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": str(answer).strip() == task.evaluation_data["expected"]}

        return [exact]


def sums(n: int) -> list[Task]:
    return [
        Task(query=f"What is {i} + 3?", id=f"s{i}", evaluation_data={"expected": str(i + 3)})
        for i in range(n)
    ]


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What must be the same in a cached run: everything but ids, timings, traces, hits and
    cost (an answer from the cache costs nothing)."""
    free = ("cache_hits", "cost_usd", "unpriced_calls", "by_model")
    usage = {k: v for k, v in report["usage"].items() if k not in free}
    return {
        "task_id": report["task_id"],
        "status": report["status"],
        "eval": report["eval"],
        "usage": usage,
    }


async def test_a_second_identical_run_sends_nothing_and_says_so(
    sim_server: Callable[..., str], tmp_path: Path, event_log: EventLog
) -> None:
    base_url = sim_server("--latency", "0.01")
    settings = Settings(llm_cache_dir=str(tmp_path / "cache"), max_concurrent_llm_calls=4)
    async with Runtime(settings):
        first = await Sums(base_url).run(sums(12))
        assert served(base_url) == 12
        acquired_before = len(event_log.named("acquired"))
        second = await Sums(base_url).run(sums(12))
    assert served(base_url) == 12  # not one more request
    assert len(event_log.named("acquired")) == acquired_before  # no slot taken either
    hits = event_log.named("cache_hit")
    assert len(hits) == 12 and {h["agent"] for h in hits} == {"solver"}
    assert {h["run_id"] for h in hits} == {second[0]["run_id"]}
    assert [r["usage"]["cache_hits"] for r in first] == [0] * 12
    assert [r["usage"]["cache_hits"] for r in second] == [1] * 12
    assert sorted(map(comparable, second), key=str) == sorted(map(comparable, first), key=str)
    assert all(r["eval"] == [{"passed": True}] for r in second)


async def test_entries_never_mix_between_base_urls_nor_hold_the_key(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server()
    same_server_other_name = base_url.replace("127.0.0.1", "localhost")
    cache = tmp_path / "cache"
    async with Runtime(Settings(llm_cache_dir=str(cache))):
        await Sums(base_url).run(sums(3))
        await Sums(same_server_other_name).run(sums(3))
        assert served(base_url) == 6  # another base URL: nothing answered from the first's
        await Sums(same_server_other_name).run(sums(3))
        assert served(base_url) == 6
    assert entries(cache) == 6
    assert SECRET.encode() not in on_disk(cache)
    assert b"authorization" not in on_disk(cache).lower()


async def test_failed_calls_are_not_kept(sim_server: Callable[..., str], tmp_path: Path) -> None:
    base_url = sim_server("--fault", "400=1.0")
    cache = tmp_path / "cache"
    async with Runtime(Settings(llm_cache_dir=str(cache))):
        reports = await Sums(base_url).run(sums(2))
    assert {r["status"] for r in reports} != {"success"}
    assert entries(cache) == 0


async def test_sdk_calls_through_the_funnel_are_cached_streams_too(
    sim_server: Callable[..., str], tmp_path: Path, event_log: EventLog
) -> None:
    base_url = sim_server("--stream-chunk-delay", "0.02")  # a stream's chunks one by one
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"), llm_base_url=base_url)):
        client = openai_client(agent="sdk")
        message = [{"role": "user", "content": "What is 20 + 22?"}]
        plain = await client.chat.completions.create(model="sim", messages=message)
        again = await client.chat.completions.create(model="sim", messages=message)
        assert served(base_url) == 1
        assert again.choices[0].message.content == plain.choices[0].message.content

        async def streamed(read_all: bool) -> str:
            stream = await client.chat.completions.create(
                model="sim", messages=message, stream=True
            )
            text = ""
            async for chunk in stream:
                text += chunk.choices[0].delta.content or "" if chunk.choices else ""
                if not read_all:
                    break
            await stream.close()
            return text

        await streamed(read_all=False)  # closed before its end: not kept
        assert served(base_url) == 2
        whole = await streamed(read_all=True)
        assert served(base_url) == 3
        assert await streamed(read_all=True) == whole == plain.choices[0].message.content
        assert served(base_url) == 3
    assert [h["agent"] for h in event_log.named("cache_hit")] == ["sdk", "sdk"]


def test_concurrent_writers_leave_one_whole_entry_and_damage_is_a_miss(tmp_path: Path) -> None:
    cache = CallCache(tmp_path)
    key = bytes.fromhex(cache.key("POST", "http://h/v1/x", b"{}"))
    bodies = [bytes([65 + i]) * 200_000 for i in range(8)]
    store = cache.db

    store.put(key, "http://h/v1/x", 200, "application/json", bodies[0]).result()
    writing = threading.Event()
    torn: list[int | None] = []  # what a reader saw that was not one writer's whole entry

    def read() -> None:
        while writing.is_set():
            answer = store.get(key, "http://h/v1/x")
            if answer is None or answer.content not in bodies:
                torn.append(None if answer is None else len(answer.content))

    def write(body: bytes) -> None:
        for _ in range(20):
            store.put(key, "http://h/v1/x", 200, "application/json", body).result()

    writing.set()
    reader = threading.Thread(target=read)
    threads = [threading.Thread(target=write, args=(body,)) for body in bodies]
    for thread in [reader, *threads]:
        thread.start()
    for thread in threads:
        thread.join()
    writing.clear()
    reader.join()
    assert torn == []  # readers during the writes saw whole entries only
    answer = store.get(key, "http://h/v1/x")
    assert answer is not None and answer.content in bodies  # one writer's whole body
    assert store.stats().entries == 1
    assert store.get(key, "http://other/v1/x") is None  # the URL is checked too
    with sqlite3.connect(store.path) as db:  # cut short behind the store's back
        db.execute("UPDATE entries SET body = substr(body, 1, 1000)")
    assert store.get(key, "http://h/v1/x") is None


@pytest.mark.parametrize(
    ("headers", "same"),
    [
        ({"Authorization": "Bearer k", "user-agent": "x/2", "x-stainless-retry-count": "2"}, True),
        ({"authorization": "Bearer k", "content-length": "2", "idempotency-key": "abc"}, True),
        ({"authorization": "Bearer other"}, False),
        ({"authorization": "Bearer k", "anthropic-version": "2023-06-01"}, False),
        ({"authorization": "Bearer k", "openai-organization": "org-b"}, False),
        ({"authorization": "Bearer k", "x-tenant": "b"}, False),  # a custom default header
    ],
)
def test_the_key_holds_who_asks_and_api_versions_not_transport_headers(
    headers: dict[str, str], same: bool
) -> None:
    base = CallCache.key("POST", "http://h/v1/x", b"{}", [("authorization", "Bearer k")])
    assert (CallCache.key("POST", "http://h/v1/x", b"{}", headers.items()) == base) is same


async def test_a_disk_that_refuses_never_fails_the_call(
    sim_server: Callable[..., str], tmp_path: Path, event_log: EventLog
) -> None:
    base_url = sim_server()
    cache = tmp_path / "cache"
    (cache / "cache.sqlite").mkdir(parents=True)  # the store's file is taken: each store fails
    async with Runtime(Settings(llm_cache_dir=str(cache))) as runtime:
        reports = await Sums(base_url).run(sums(3))
        assert runtime.cache is not None and runtime.cache.store_failures == 3
    assert {r["status"] for r in reports} == {"success"}
    (failure,) = event_log.named("cache_store_failed")  # the first one only
    assert failure["level"] == "WARNING" and "cache.sqlite" in failure["error"]


class Samples(Benchmark):
    """Each repetition draws the same prompt `draws` times (self-consistency)."""

    def __init__(self, base_url: str, draws: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url, self.draws = base_url, draws

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel("sim", base_url=self.base_url)

        async def sampler(query: Any) -> list[str]:
            return [(await model.generate(query, temperature=1.0)).text for _ in range(self.draws)]

        return [sampler], {}


async def test_repetitions_and_repeated_samples_keep_their_own_answers(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server()
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        first = await Samples(base_url, draws=3, n_task_repeats=2).run(sums(2))
        assert served(base_url) == 2 * 2 * 3  # nothing shared within the first run
        assert {r["usage"]["cache_hits"] for r in first} == {0}
        second = await Samples(base_url, draws=3, n_task_repeats=2).run(sums(2))
        assert served(base_url) == 12
        assert {r["usage"]["cache_hits"] for r in second} == {3}
        third = await Samples(base_url, draws=4, n_task_repeats=2).run(sums(2))
        assert served(base_url) == 12 + 4  # each repetition's fourth draw is new
        assert {r["usage"]["cache_hits"] for r in third} == {3}


async def test_a_stream_cut_short_is_not_kept(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server("--truncated-rate", "1.0")
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"), llm_base_url=base_url)):
        client = openai_client()
        for _ in range(2):
            stream = await client.chat.completions.create(
                model="sim", messages=[{"role": "user", "content": "What is 1 + 1?"}], stream=True
            )
            try:
                async for _chunk in stream:
                    pass
            except Exception:  # the SDK may notice the cut itself
                pass
            finally:
                await stream.close()
    assert served(base_url) == 2


async def test_sync_callers_filling_anyios_thread_pool_still_get_answers(
    tmp_path: Path,
) -> None:
    """More sync callers than anyio's default 40 worker threads, each waiting in a thread for its
    call: the cache's file access has threads of its own, so nobody waits for a free one."""
    import anyio
    import anyio.to_thread

    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        model = OpenAIChatModel()
        texts: list[str] = []

        async def caller(i: int) -> None:
            completion = await anyio.to_thread.run_sync(model.generate_sync, f"What is {i} + 1?")
            texts.append(completion.text)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                for i in range(60):
                    group.start_soon(caller, i)
    assert sorted(texts, key=int) == [str(i + 1) for i in range(60)]


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "cacheable_expected"),
    [
        ("POST", "/v1/chat/completions", {}, b'{"model": "m"}', True),
        ("POST", "/v1/messages", {}, b'{"model": "m"}', True),
        ("POST", "/v1/responses", {}, b'{"model": "m", "background": true}', False),
        ("POST", "/v1/files", {"content-type": "multipart/form-data; boundary=x"}, b"--x", False),
        ("POST", "/v1/threads/t1/runs", {}, b'{"assistant_id": "a"}', False),
        ("GET", "/v1/models", {}, b"", False),
    ],
)
def test_only_inference_requests_are_cached(
    method: str, path: str, headers: dict[str, str], body: bytes, cacheable_expected: bool
) -> None:
    from asynceval.funnel._exchange import cacheable

    request = httpx.Request(method, "http://h" + path, headers=headers, content=body or None)
    assert cacheable(request) is cacheable_expected


def test_credentials_in_the_query_string_scope_the_key(tmp_path: Path) -> None:
    from asynceval.funnel._cache import CacheUse

    cache = CallCache(tmp_path)

    def key(url: str) -> str:
        return CacheUse(cache, "POST", url, b"{}").key

    assert key("http://h/v1/x?key=a") == key("http://h/v1/x?key=a") != key("http://h/v1/x?key=b")
    assert key("http://h/v1/x?key=a") != key("http://h/v1/x")
    assert key("http://h/v1/x?api-version=1&key=a") != key("http://h/v1/x?api-version=2&key=a")


async def test_credentials_in_the_query_string_are_never_stored_nor_shown(
    tmp_path: Path, event_log: EventLog
) -> None:
    from asynceval.funnel._cache import CacheUse

    use = CacheUse(CallCache(tmp_path), "POST", f"http://h/v1/x?key={SECRET}", b"{}")
    await use.store(CachedAnswer(200, "application/json", b"{}"))
    use.hit(None)
    assert entries(tmp_path) == 1
    assert SECRET.encode() not in on_disk(tmp_path) and use.url == "http://h/v1/x"
    assert SECRET not in "\n".join(event_log.lines())


async def test_sdk_calls_that_fail_or_answer_an_error_are_not_kept(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    import openai

    base_url = sim_server("--fault", "400=1.0")
    cache = tmp_path / "cache"
    async with Runtime(Settings(llm_cache_dir=str(cache), llm_base_url=base_url)):
        client = openai_client()
        for _ in range(2):
            with pytest.raises(openai.BadRequestError):
                await client.chat.completions.create(
                    model="sim", messages=[{"role": "user", "content": "hi"}]
                )
    assert served(base_url) == 2
    assert entries(cache) == 0


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b'{"error": {"message": "upstream failed"}}'),  # a 200 error body
        (
            "text/event-stream",
            b'data: {"choices": []}\n\nevent: error\ndata: {}\n\ndata: [DONE]\n\n',
        ),
    ],
)
async def test_a_200_that_says_error_is_not_kept(
    tmp_path: Path, content_type: str, body: bytes
) -> None:
    from asynceval.interop import http_client

    asked: list[int] = []

    def provider(request: httpx.Request) -> httpx.Response:
        asked.append(1)
        return httpx.Response(200, headers={"content-type": content_type}, content=body)

    async with (
        Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))),
        http_client(transport=httpx.MockTransport(provider)) as client,
    ):
        for _ in range(2):
            response = await client.post("http://h/v1/chat/completions", json={"model": "m"})
            assert await response.aread() == body
    assert len(asked) == 2


async def test_two_tasks_asking_the_same_keep_their_own_entries(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server()
    same = [
        Task(query="What is 1 + 3?", id=task_id, evaluation_data={"expected": "4"})
        for task_id in ("a", "b")
    ]
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        first = await Sums(base_url).run(same)
    assert served(base_url) == 2 and [r["usage"]["cache_hits"] for r in first] == [0, 0]
    assert entries(tmp_path / "cache") == 2


async def test_the_order_keyword_arguments_come_in_is_not_part_of_the_key(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server()
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        model = OpenAIChatModel("sim", base_url=base_url)
        first = await model.generate("What is 2 + 5?", temperature=0.5, max_tokens=20)
        again = await model.generate("What is 2 + 5?", max_tokens=20, temperature=0.5)
    assert served(base_url) == 1 and again.text == first.text


async def test_embedded_simulators_on_other_configurations_keep_their_own_entries(
    tmp_path: Path,
) -> None:
    """Every embedded simulator has one URL: its seed and tokens_per_char (which its answers and
    usage follow) are part of the key, so another configuration is asked, not answered from a
    neighbour's entry; the same configuration is answered from the cache."""
    from asynceval.sim import SimConfig

    question = "Name a colour, please."

    async def ask(config: SimConfig) -> tuple[str, int, int]:
        model = OpenAIChatModel(sim_config=config)
        completion = await model.generate(question)
        assert model.sim is not None
        return completion.text, completion.usage.total_tokens, model.sim.stats()["requests"]

    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        first = await ask(SimConfig(seed=1, latency=0))
        assert first[2] == 1
        assert await ask(SimConfig(seed=1, latency=0.001)) == (*first[:2], 0)  # from the cache
        other_seed = await ask(SimConfig(seed=2, latency=0))
        other_count = await ask(SimConfig(seed=1, latency=0, tokens_per_char=1.0))
    assert other_seed[2] == 1 and other_count[2] == 1  # each asked its own simulator
    assert other_count[1] > first[1]  # counted by its own tokens_per_char
    assert entries(tmp_path / "cache") == 3
