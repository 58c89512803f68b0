"""A run's cost budget on a Dask cluster: every worker's calls reserve their worst case from one
ledger on the scheduler, so the whole cluster spends no more than the budget; once it is
exhausted no repetition starts, the run exits 3, and a resume with a bigger budget finishes it.

The agent asks for at most 4 output tokens with a long prompt, so that a call's worst case (a
prompt token per byte of its body, plus max_tokens) is near what it costs (the simulated provider
counts a token per 4 characters): a budget of a third of the run's cost then holds many calls
at once, and the run stops near its end, not at its first call."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from distributed import Client, LocalCluster

from asynceval import Benchmark, BenchmarkCallback, OpenAIChatModel, Settings, Task
from asynceval.analysis import check_events
from asynceval.distributed import DaskBackend
from asynceval.distributed._budget import ClusterBudget
from asynceval.distributed._ledger import (
    EXHAUSTED,
    GONE,
    GRANTED,
    WAIT,
    BudgetPlugin,
    budget_topic,
)
from asynceval.engine import read_records

from ..conftest import EventLog, start_sim_server, stop_sim_server
from .conftest import LEASE_TIMEOUT_S, async_local_cluster

N_TASKS = 120
BUDGET = 0.015
"""About a third of what the 120 calls cost ($0.000376 each at the simulator's price)."""
PER_WORKER = 10
"""MAX_CONCURRENT_TASKS: a worker runs 10 repetitions at once, so at most 20 are out at a time."""
PAD = " Answer with the number only, please." * 40

TARGET = f"""
from asynceval import Benchmark, OpenAIChatModel, Task


class Sums(Benchmark):
    def default_tasks(self):
        pad = {PAD!r}
        return [Task(query=f"What is {{i}} + 2?{{pad}}", id=f"t{{i:03d}}") for i in range({N_TASKS})]

    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel(model="asynceval-sim")

        async def agent(query):
            reply = await model.generate([{{"role": "user", "content": query}}], max_tokens=4)
            return reply.text

        return [agent], {{}}


benchmark = Sums
"""


class Sums(Benchmark):
    """Each repetition asks the provider one sum, with a long prompt and max_tokens=4."""

    def __init__(self, base_url: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.base_url = base_url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(model="asynceval-sim", base_url=self.base_url, api_key="k")

        async def agent(query: str) -> str:
            reply = await model.generate([{"role": "user", "content": query}], max_tokens=4)
            return reply.text

        return [agent], {}


def tasks() -> list[Task]:
    return [Task(query=f"What is {i} + 2?{PAD}", id=f"t{i:03d}") for i in range(N_TASKS)]


def released_cost(events: list[dict[str, Any]]) -> Decimal:
    """What the calls cost, summed exactly from their `released` events."""
    return sum(
        (Decimal(repr(e["cost_usd"])) for e in events if e["event"] == "released"),
        Decimal(0),
    )


@pytest.fixture
def sim() -> Any:
    url, process = start_sim_server("--latency", "0.05")
    yield url
    stop_sim_server(process)


@pytest.mark.cluster
@pytest.mark.slow
async def test_the_budget_holds_across_workers_and_stops_the_run(
    cluster: LocalCluster, sim: str, tmp_path: Path, event_log: EventLog
) -> None:
    """Two workers, 20 calls at once: what every call cost together is within the budget, the
    budget refused calls on the workers (budget_exhausted), and no repetition started after
    that: at most the 20 out at the time were refused, the rest never ran. What the run says it
    spent is what its calls cost."""
    settings = Settings(max_concurrent_llm_calls=20, max_concurrent_tasks=PER_WORKER)
    bench = Sums(sim, settings=settings)
    with anyio.fail_after(120):
        reports = await bench.run(
            tasks(),
            backend=DaskBackend(cluster.scheduler_address),
            results_path=tmp_path / "results.jsonl",
            max_cost_usd=BUDGET,
        )
    statuses = Counter(r["status"] for r in reports)
    assert set(statuses) == {"success", "budget_exhausted"}, statuses
    assert statuses["budget_exhausted"] <= 2 * PER_WORKER, statuses
    assert len(reports) < N_TASKS - 40, statuses  # once exhausted, nothing more started
    events = event_log.all()
    spent = released_cost(events)
    assert spent <= Decimal(repr(BUDGET)), (spent, statuses)
    assert spent > Decimal(repr(BUDGET)) / 2  # it stopped near the end of its budget
    released = [e for e in events if e["event"] == "released"]
    assert len({e["worker"] for e in released}) == 2  # one budget for both workers
    started = [e for e in events if e["event"] == "task_started"]
    assert len(started) == len(reports)  # every repetition that started was recorded
    refused = [e for e in events if e["event"] == "task_finished" and e["status"] != "success"]
    first_refusal = min(_seconds(e) for e in refused)
    late = [e for e in started if _seconds(e) > first_refusal + 0.5]  # (the caller's hop)
    assert not late, late
    assert bench.budget is not None and bench.budget.exhausted
    assert abs(bench.budget.spent - spent) < Decimal("1e-12"), (bench.budget, spent)
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    assert finished["budget_exhausted"] is True and finished["budget_usd"] == BUDGET
    assert finished["budget_spent_usd"] <= BUDGET
    check = check_events(events)
    assert check.budget_held, check


@pytest.mark.cluster
@pytest.mark.slow
def test_the_command_line_exits_3_and_a_bigger_budget_resumes_to_the_end(
    cluster: LocalCluster, sim: str, tmp_path: Path
) -> None:
    """`asynceval run --dask ... --max-cost` stops at its budget with one line and exit 3; its
    events' costs add up to no more than the budget; `--resume DIR --max-cost BIGGER` then runs
    the rest, and every task has exactly one success in the results file."""
    target = tmp_path / "sums.py"
    target.write_text(TARGET)
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "asynceval", "run", str(target), "--dask", cluster.scheduler_address,
        "--base-url", sim, "--max-concurrent-llm-calls", "20",
        "--max-concurrent-tasks", str(PER_WORKER), "--quiet",
    ]  # fmt: skip
    first = subprocess.run(
        [*command, "--out", str(out), "--max-cost", str(BUDGET)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert first.returncode == 3, first.stderr
    (line,) = [x for x in first.stderr.splitlines() if "budget exhausted" in x]
    assert f"of ${BUDGET:.6g};" in line and "--resume" in line, line
    results = out / "results.jsonl"
    before = Counter(r["status"] for r in read_records(results)[0] if r.get("type") != "header")
    assert set(before) == {"success", "budget_exhausted"}, before
    assert before["budget_exhausted"] <= 2 * PER_WORKER and before.total() < N_TASKS - 40, before
    first_events = [e for e in _events(out) if e.get("run_id") == _run_ids(out)[0]]
    assert released_cost(first_events) <= Decimal(repr(BUDGET)), before

    done = subprocess.run(
        [*command, "--resume", str(out), "--max-cost", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [r for r in read_records(results)[0] if r.get("type") != "header"]
    successes = Counter(r["task_id"] for r in records if r["status"] == "success")
    assert sorted(successes) == [f"t{i:03d}" for i in range(N_TASKS)]
    assert set(successes.values()) == {1}, successes
    assert all(r["repeat_idx"] == 0 for r in records)
    # the budget was about a third of what the whole run cost
    whole = sum(Decimal(repr(r["usage"]["cost_usd"])) for r in records if r["status"] == "success")
    assert Decimal("0.25") < Decimal(repr(BUDGET)) / whole < Decimal("0.4"), whole


class KillAfter(BenchmarkCallback):
    """SIGKILLs one worker process once `after` reports are in."""

    def __init__(self, pid: int, after: int) -> None:
        self.pid, self.after, self.seen, self.killed = pid, after, 0, False

    def on_task_repeat_end(self, benchmark: Benchmark, report: Any) -> None:
        self.seen += 1
        if self.seen == self.after:
            os.kill(self.pid, signal.SIGKILL)
            self.killed = True


@pytest.mark.cluster
@pytest.mark.slow
async def test_a_worker_killed_with_calls_in_flight_leaves_them_spent(
    sim: str, tmp_path: Path, event_log: EventLog
) -> None:
    """One of two workers SIGKILLed mid-run: what its calls in flight reserved counts as spent
    (the provider may bill them), the survivor is not left waiting for them, and the run ends
    at its budget, having spent no more than it; each task is recorded once."""
    async with (
        async_local_cluster(threads=PER_WORKER) as cluster,
        Client(cluster, asynchronous=True) as client,
    ):
        pids = await client.run(os.getpid)
        killer = KillAfter(pids[sorted(pids)[0]], after=8)
        settings = Settings(max_concurrent_llm_calls=20, max_concurrent_tasks=PER_WORKER)
        bench = Sums(sim, settings=settings)
        bench.callbacks.append(killer)
        backend = DaskBackend(cluster.scheduler_address, lease_timeout=LEASE_TIMEOUT_S)
        with anyio.fail_after(60):
            reports = await bench.run(
                tasks(), backend=backend, results_path=tmp_path / "r.jsonl", max_cost_usd=BUDGET
            )
    assert killer.killed
    pairs = [(r["task_id"], r["repeat_idx"]) for r in reports]
    assert len(pairs) == len(set(pairs)) < N_TASKS
    assert "budget_exhausted" in {r["status"] for r in reports}
    assert bench.budget is not None and bench.budget.exhausted
    assert bench.budget.spent <= Decimal(repr(BUDGET)), bench.budget
    assert released_cost(event_log.all()) <= bench.budget.spent  # the lost calls' too


def _seconds(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def _events(out: Path) -> list[dict[str, Any]]:
    lines = (out / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _run_ids(out: Path) -> list[str]:
    """The run ids of the results file's headers, first run first."""
    headers = [r for r in read_records(out / "results.jsonl")[0] if r.get("type") == "header"]
    return [str(h["run_id"]) for h in headers]


# The ledger on its own: a scheduler is a plugin table, handlers and an event log to it.


def _scheduler() -> Any:
    logged: list[tuple[str, Any]] = []
    return SimpleNamespace(
        plugins={},
        handlers={},
        logged=logged,
        log_event=lambda topic, msg: logged.append((topic, msg)),
    )


async def _ledger(limit: str) -> tuple[BudgetPlugin, Any]:
    scheduler = _scheduler()
    plugin = BudgetPlugin("run", "ledger-1", Decimal(limit))
    await plugin.start(scheduler)
    scheduler.plugins["run-budget"] = plugin
    return plugin, scheduler


async def test_a_reservation_that_does_not_fit_waits_for_one_in_flight_to_settle() -> None:
    """Limit 10: 6 is reserved; another 6 waits while the first is in flight, and is granted
    as soon as the first settles at 2 (2 + 6 <= 10); the check and the reservation are one
    step, so the third 6 cannot fit beside them and, nothing else in flight, exhausts it."""
    plugin, scheduler = await _ledger("10")
    assert (await plugin.reserve("a", "w1", Decimal(6), 1.0))[0] == GRANTED
    answer: list[str] = []

    async def second() -> None:
        answer.append((await plugin.reserve("b", "w2", Decimal(6), 5.0))[0])

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        assert answer == []  # waiting: the first may settle for less than it reserved
        plugin.settle("a", "w1", 1, Decimal(6), Decimal(2), 1, Decimal(0))
    assert answer == [GRANTED]
    assert (plugin.spent, plugin.reserved, plugin.waitable) == (Decimal(2), Decimal(6), 1)
    # with the second still in flight, a third that cannot fit waits, then asks again
    assert (await plugin.reserve("a", "w1", Decimal(6), 0.05))[0] == WAIT
    plugin.settle("b", "w2", 1, Decimal(6), Decimal(6), 1, Decimal(0))
    assert (await plugin.reserve("a", "w1", Decimal(6), 1.0))[0] == EXHAUSTED
    assert (await plugin.reserve("a", "w1", Decimal("0.01"), 1.0))[0] == EXHAUSTED  # sticky
    assert plugin.exhausted and plugin.refused == 2 and plugin.spent == 8
    assert scheduler.logged == [(budget_topic("run"), {"exhausted": True})]


async def test_a_settle_sent_twice_counts_once_and_another_ledger_is_not_counted() -> None:
    plugin, scheduler = await _ledger("10")
    assert (await plugin.reserve("a", "w1", Decimal(4), 1.0))[0] == GRANTED
    settle = scheduler.handlers["asynceval_budget_settle"]
    message = {
        "run": "run", "ledger": "ledger-1", "sender": "a", "worker": "w1", "seq": 1,
        "reserved": "4", "cost": "3", "waitable": 1, "overrun": "0",
    }  # fmt: skip
    settle(**message)
    settle(**message)  # its answer was lost: sent again
    settle(**{**message, "ledger": "a run before", "seq": 2})
    state = scheduler.handlers["asynceval_budget_state"](run="run", ledger="ledger-1")
    assert state["spent"] == "3" and state["reserved"] == "0" and state["waitable"] == 0


async def test_a_removed_worker_leaves_its_reservations_spent_and_not_waited_for() -> None:
    """A worker dies with a call in flight: its reservation counts as spent (the provider may
    bill it), a reservation waiting for it is refused rather than left waiting, and one the
    dead worker itself was waiting for is not granted (nobody would settle it)."""
    plugin, _ = await _ledger("10")
    assert (await plugin.reserve("a", "w1", Decimal(7), 1.0))[0] == GRANTED
    answers: dict[str, str] = {}

    async def waiting(sender: str, worker: str) -> None:
        answers[worker] = (await plugin.reserve(sender, worker, Decimal(5), 5.0))[0]

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiting, "a", "w1")
        tg.start_soon(waiting, "b", "w2")
        await anyio.wait_all_tasks_blocked()
        plugin.remove_worker(None, "w1", stimulus_id="test")
    assert answers == {"w1": GONE, "w2": EXHAUSTED}
    assert (plugin.spent, plugin.reserved, plugin.waitable) == (Decimal(7), Decimal(0), 0)
    plugin.settle("a", "w1", 1, Decimal(7), Decimal(1), 1, Decimal(0))  # too late: not counted
    assert plugin.spent == 7


class _Rpc:
    """A worker's connection to the fake scheduler: each call goes to its handler; the answer
    to the first settle is lost (the scheduler took it; the worker does not know)."""

    def __init__(self, scheduler: Any) -> None:
        self.handlers = scheduler.handlers
        self.answers_to_lose = 1
        self.settles = 0

    def __getattr__(self, op: str) -> Any:
        async def call(**message: Any) -> Any:
            answer = self.handlers[op](**message)
            if inspect.isawaitable(answer):
                answer = await answer
            if op == "asynceval_budget_settle":
                self.settles += 1
                if self.answers_to_lose:
                    self.answers_to_lose -= 1
                    raise OSError("connection lost")
            return answer

        return call


async def test_what_a_worker_settles_reaches_the_ledger_once_from_any_thread() -> None:
    """Settles and a stream's mark from the loop and from another thread, without waiting; the
    first message's answer is lost and it is sent again: the ledger counts everything once."""
    plugin, scheduler = await _ledger("10")
    rpc = _Rpc(scheduler)
    budget = ClusterBudget("run", "ledger-1", "10", rpc, asyncio.get_running_loop(), "w1")
    await budget.reserve(Decimal(6))
    await budget.reserve(Decimal(3))
    assert (plugin.reserved, plugin.waitable) == (Decimal(9), 2)
    await anyio.to_thread.run_sync(lambda: budget.settle(Decimal(6), Decimal(2)))
    budget.streaming()
    budget.settle(Decimal(3), Decimal(3), waited=False)
    assert await budget.flushed(5)
    assert rpc.settles >= 2  # the lost one was sent again
    assert (plugin.spent, plugin.reserved, plugin.waitable) == (Decimal(5), Decimal(0), 0)
    assert (budget.spent, budget.reserved) == (Decimal(5), Decimal(0))
