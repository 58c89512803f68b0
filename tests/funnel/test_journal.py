"""The call journal: a resumed repetition replays the calls an earlier segment of the run had
finished (the provider's own counters see nothing sent, no slot is taken, `journal_hit` events
and `usage.journal_hits` say so) and goes on live from the first it had not; a repetition retried
within one segment goes live; journal first, then the cache; SDK clients through the interop
transport alike; after a kill -9 in the middle of a multi-turn run, no finished call is sent
twice."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from asynceval import Benchmark, OpenAIChatModel, Runtime, Settings, Task, events
from asynceval.funnel import CallJournal, journal_scope, track_usage
from asynceval.interop import openai_client

from ..conftest import EventLog


def served(base_url: str) -> int:
    """The provider's own count of requests it answered."""
    return int(httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=5).json()["requests"])


class Turns(Benchmark):
    """Each repetition's agent makes `turns` calls, each on the answer before it; with
    `fail_after`, it raises after that many calls (an interrupted repetition)."""

    def __init__(
        self, base_url: str, turns: int, fail_after: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.base_url, self.turns, self.fail_after = base_url, turns, fail_after

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel("sim", base_url=self.base_url, api_key="sk-journal")

        async def agent(query: Any) -> str:
            text = str(query)
            for turn in range(self.turns):
                if self.fail_after is not None and turn == self.fail_after:
                    raise RuntimeError("interrupted")
                text = (await model.generate(f"{text} then turn {turn}", agent="agent")).text
            return text

        return [agent], {}


def tasks(n: int) -> list[Task]:
    return [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(n)]


async def run(bench: Benchmark, journal: CallJournal | None, n: int = 3) -> list[dict[str, Any]]:
    with journal_scope(journal):
        return list(await bench.run(tasks(n)))


async def test_a_resumed_run_replays_finished_calls_and_sends_nothing(
    sim_server: Callable[..., str], tmp_path: Path, event_log: EventLog
) -> None:
    base_url = sim_server()
    path = tmp_path / "journal.sqlite"
    async with Runtime(Settings(max_concurrent_llm_calls=4)):
        async with CallJournal(path, "first") as journal:
            first = await run(Turns(base_url, turns=4), journal)
        assert served(base_url) == 12 and journal.stored == 12
        acquired = len(event_log.named("acquired"))
        async with CallJournal(path, "second") as journal:
            assert journal.replayable == 12
            second = await run(Turns(base_url, turns=4), journal)
    assert served(base_url) == 12  # not one request more
    assert len(event_log.named("acquired")) == acquired  # no slot taken
    hits = event_log.named("journal_hit")
    assert len(hits) == 12 and {h["agent"] for h in hits} == {"agent"}
    assert not event_log.named("cache_hit") and journal.hits == 12
    assert [r["usage"]["journal_hits"] for r in second] == [4, 4, 4]

    # A replayed call costs nothing: what it cost is in the first run's reports only.
    replay_free = ("journal_hits", "cost_usd", "unpriced_calls", "by_model")

    def usage(report: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in report["usage"].items() if k not in replay_free}

    assert sorted(map(usage, second), key=str) == sorted(map(usage, first), key=str)
    assert [r["usage"]["unpriced_calls"] for r in second] == [0, 0, 0]
    assert [r["usage"]["unpriced_calls"] for r in first] == [4, 4, 4]  # model "sim": no price
    assert [r["usage"]["llm_calls"] for r in second] == [4, 4, 4]


async def test_an_interrupted_repetition_goes_on_live_from_its_first_unfinished_call(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server()
    path = tmp_path / "journal.sqlite"
    async with CallJournal(path, "first") as journal:
        failed = await run(Turns(base_url, turns=5, fail_after=2), journal)
    assert {r["status"] for r in failed} != {"success"}
    assert served(base_url) == 3 * 2
    async with CallJournal(path, "second") as journal:
        done = await run(Turns(base_url, turns=5), journal)
    assert {r["status"] for r in done} == {"success"}
    assert served(base_url) == 3 * 2 + 3 * 3  # turns 3-5 of each, live
    assert [r["usage"]["journal_hits"] for r in done] == [2, 2, 2]
    assert [r["usage"]["llm_calls"] for r in done] == [5, 5, 5]


async def test_a_repetition_retried_within_one_segment_goes_live(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    base_url = sim_server()
    async with CallJournal(tmp_path / "journal.sqlite", "only") as journal:
        await run(Turns(base_url, turns=2), journal)
        again = await run(Turns(base_url, turns=2), journal)
    assert served(base_url) == 12
    assert [r["usage"]["journal_hits"] for r in again] == [0, 0, 0]


async def test_the_journal_answers_before_the_cache(
    sim_server: Callable[..., str], tmp_path: Path, event_log: EventLog
) -> None:
    base_url = sim_server()
    path = tmp_path / "journal.sqlite"
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        async with CallJournal(path, "first") as journal:
            await run(Turns(base_url, turns=2), journal)
        async with CallJournal(path, "second") as journal:
            second = await run(Turns(base_url, turns=2), journal)
    assert served(base_url) == 6
    assert len(event_log.named("journal_hit")) == 6 and not event_log.named("cache_hit")
    assert {r["usage"]["cache_hits"] for r in second} == {0}


async def test_cache_hits_are_journaled_too(sim_server: Callable[..., str], tmp_path: Path) -> None:
    """A call answered from the cache is a finished call of its repetition: kept in the journal,
    so a resume replays it even if the cache has evicted it since."""
    base_url = sim_server()
    path = tmp_path / "journal.sqlite"
    async with Runtime(Settings(llm_cache_dir=str(tmp_path / "cache"))):
        await run(Turns(base_url, turns=2), None)  # fills the cache only
        async with CallJournal(path, "first") as journal:
            cached = await run(Turns(base_url, turns=2), journal)
        assert [r["usage"]["cache_hits"] for r in cached] == [2, 2, 2]
    async with CallJournal(path, "second") as journal:  # no cache now
        replayed = await run(Turns(base_url, turns=2), journal)
    assert served(base_url) == 6
    assert [r["usage"]["journal_hits"] for r in replayed] == [2, 2, 2]


async def test_sdk_calls_through_the_interop_transport_are_replayed(
    sim_server: Callable[..., str], tmp_path: Path, event_log: EventLog
) -> None:
    base_url = sim_server()
    path = tmp_path / "journal.sqlite"
    message = [{"role": "user", "content": "What is 20 + 22?"}]

    async def repetition(segment: str) -> tuple[list[str], dict[str, int]]:
        async with CallJournal(path, segment) as journal:
            with (
                journal_scope(journal),
                events.bind_context(task_id="t", repeat_idx=0),
                track_usage() as usage,
            ):
                client = openai_client(base_url=base_url, agent="sdk")
                texts = []
                for _ in range(2):
                    done = await client.chat.completions.create(model="sim", messages=message)
                    texts.append(done.choices[0].message.content or "")
                await client.close()
        return texts, usage.as_dict()

    async with Runtime(Settings(llm_base_url=base_url)):
        first, _ = await repetition("first")
        again, usage = await repetition("second")
        assert served(base_url) == 2 and again == first
        assert usage["journal_hits"] == 2 and usage["llm_calls"] == 2
        assert [h["agent"] for h in event_log.named("journal_hit")] == ["sdk", "sdk"]
        with sqlite3.connect(path) as db:  # one entry cut short behind the journal's back
            db.execute("UPDATE entries SET body = substr(body, 1, 20) WHERE id = 1")
        third, usage = await repetition("third")
    assert third == first and served(base_url) == 3  # the cut one asked again, no error
    assert usage["journal_hits"] == 1


CHILD = textwrap.dedent(
    """
    import json, os, sys
    import anyio
    from asynceval import Benchmark, OpenAIChatModel, Runtime, Settings, Task
    from asynceval.funnel import CallJournal, journal_scope

    base_url, journal_path, finished_path, segment = sys.argv[1:5]
    finished = os.open(finished_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    class Turns(Benchmark):
        async def setup_agents(self, agent_data, environment, task, user):
            model = OpenAIChatModel("sim", base_url=base_url, api_key="sk-journal")

            async def agent(query):
                text = str(query)
                for turn in range(6):
                    text = (await model.generate(f"{text} then turn {turn}")).text
                    os.write(finished, f"{task.id} {turn}\\n".encode())  # the agent has it
                return text

            return [agent], {}

    async def main():
        tasks = [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(8)]
        async with Runtime(Settings(max_concurrent_llm_calls=4)):
            async with CallJournal(journal_path, segment) as journal:
                with journal_scope(journal):
                    reports = await Turns(max_concurrent_tasks=4).run(tasks)
        print(json.dumps({r["task_id"]: r["usage"]["journal_hits"] for r in reports}))

    anyio.run(main)
    """
)


def test_after_a_kill_9_no_finished_call_is_sent_twice(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """8 tasks of 6 turns (48 calls), killed with SIGKILL at a random point; the second segment
    replays every call an agent had been answered before the kill and sends only the rest."""
    base_url = sim_server("--latency", "0.02")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    journal, finished = tmp_path / "journal.sqlite", tmp_path / "finished.txt"
    env = {**os.environ, "LOG_LEVEL": "ERROR"}
    kill_after = random.Random().randint(4, 40)
    child = subprocess.Popen(
        [sys.executable, str(script), base_url, str(journal), str(finished), "one"],
        env=env,
        stdout=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not finished.exists() or len(finished.read_text().splitlines()) < kill_after:
        assert child.poll() is None and time.monotonic() < deadline, "the child ended early"
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    answered = set(finished.read_text().splitlines())
    sent_before = served(base_url)
    assert len(answered) >= kill_after
    resumed = subprocess.run(
        [sys.executable, str(script), base_url, str(journal), str(finished), "two"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    replayed = json.loads(resumed.stdout)
    for task_id, hits in replayed.items():  # every turn its agent had been answered: replayed
        assert hits >= sum(line.split()[0] == task_id for line in answered), (task_id, hits)
    # and what was sent is exactly the rest (a call committed in the instant before the kill,
    # not yet seen by its agent, is replayed too)
    assert served(base_url) - sent_before == 48 - sum(replayed.values()), (kill_after, answered)
