"""Runs on a Dask cluster (`DaskBackend`): the simulated provider on loopback counts requests in
flight on its side of the wire, across every worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from distributed import Client, LocalCluster

from asynceval import Benchmark, BenchmarkCallback, OpenAIChatModel, Settings, Task, events
from asynceval.analysis import check_events
from asynceval.distributed import DaskBackend
from asynceval.engine import read_records
from asynceval.errors import BackendLost, ConfigError

from ..conftest import EventLog, start_sim_server, stop_sim_server
from .conftest import LEASE_TIMEOUT_S, async_local_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


class Sums(Benchmark):
    """Each repetition asks the provider one sum; `fail_on` tasks raise in the agent."""

    def __init__(self, base_url: str, fail_on: frozenset[str] = frozenset(), **kw: Any) -> None:
        super().__init__(**kw)
        self.base_url = base_url
        self.fail_on = fail_on

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(model="asynceval-sim", base_url=self.base_url, api_key="k")
        fail = task.id in self.fail_on

        async def agent(query: str) -> str:
            if fail:
                raise ValueError(f"agent broke on {task.id}")
            return (await model.generate([{"role": "user", "content": query}])).text

        return [agent], {}


def stats(base_url: str) -> dict[str, Any]:
    return httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=5).json()


@pytest.fixture
def sim() -> Any:
    url, process = start_sim_server("--latency", "0.1")
    yield url
    stop_sim_server(process)


async def test_the_limit_holds_across_workers_on_the_wire(
    cluster: LocalCluster, sim: str, tmp_path: Path, event_log: EventLog
) -> None:
    """2 workers x 20 concurrent repetitions, limit 5: the provider never sees more than 5 (each
    worker alone would allow 5), and the caller's events show both workers' calls."""
    settings = Settings(max_concurrent_llm_calls=5, max_concurrent_tasks=20)
    bench = Sums(sim, settings=settings)
    tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(60)]
    reports = await bench.run(
        tasks, backend=DaskBackend(cluster.scheduler_address), results_path=tmp_path / "r.jsonl"
    )
    assert sorted(r["task_id"] for r in reports) == sorted(t.id for t in tasks)
    assert {r["status"] for r in reports} == {"success"}
    assert all(r["usage"]["llm_calls"] == 1 for r in reports)
    served = stats(sim)
    assert served["requests"] == 60 and served["max_in_flight"] == 5, served
    events = event_log.all()
    (started,) = [e for e in events if e["event"] == "run_started"]
    (finished_event,) = [e for e in events if e["event"] == "run_finished"]
    assert started["backend"] == "dask" and started["workers"] == 2
    acquired = [e for e in events if e["event"] == "acquired"]
    assert len(acquired) == 60 and len({e["worker"] for e in acquired}) == 2
    assert len([e for e in events if e["event"] == "released"]) == 60
    check = check_events(events)
    assert check.max_in_flight <= 5 and check.ok, check
    # the workers' events and reports carry the caller's run_id, as its own do
    (header,) = [r for r in read_records(tmp_path / "r.jsonl")[0] if r.get("type") == "header"]
    assert {e.get("run_id") for e in events} == {header["run_id"]}
    assert {r["run_id"] for r in reports} == {header["run_id"]}
    # every worker's event is in before the run's last line
    after = events[events.index(finished_event) :]
    assert not [e for e in after if "worker" in e], after


async def test_a_repetition_that_raises_on_a_worker_is_a_report(
    cluster: LocalCluster, sim: str, tmp_path: Path, event_log: EventLog
) -> None:
    bench = Sums(sim, fail_on=frozenset({"t1"}), settings=Settings(max_concurrent_llm_calls=5))
    tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(4)]
    # the application's bound fields reach the workers' events; its own `worker` gives way
    with events.bind_context(experiment="e1", worker="the application's"):
        reports = await bench.run(tasks, backend=DaskBackend(cluster.scheduler_address))
    acquired = event_log.named("acquired")
    assert len(acquired) == 3 and {e["experiment"] for e in acquired} == {"e1"}  # t1 breaks first
    assert {e["worker"] for e in acquired} <= set(cluster.scheduler_info["workers"])
    by_id = {r["task_id"]: r for r in reports}
    assert by_id["t1"]["status"] != "success"
    assert "agent broke on t1" in by_id["t1"]["error"]["message"]
    assert [by_id[t]["status"] for t in ("t0", "t2", "t3")] == ["success"] * 3


async def test_a_benchmark_that_cannot_be_pickled_gets_one_clear_error(sim: str) -> None:
    bench = Sums(sim)
    bench.lock = threading.Lock()  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"'lock'.*cannot pickle") as caught:
        await bench.run([Task(query="What is 1 + 1?", id="a")], backend=DaskBackend("tcp://x:1"))
    assert "Sums cannot be sent to the Dask workers" in str(caught.value)


class KillAfter(BenchmarkCallback):
    """SIGKILLs one worker process once `after` reports are in."""

    def __init__(self, pid: int, after: int) -> None:
        self.pid, self.after, self.seen, self.killed_at = pid, after, 0, 0.0

    def on_task_repeat_end(self, benchmark: Benchmark, report: Any) -> None:
        self.seen += 1
        if self.seen == self.after:
            os.kill(self.pid, signal.SIGKILL)
            self.killed_at = time.monotonic()


async def test_a_worker_killed_mid_run_loses_nothing(sim: str, tmp_path: Path) -> None:
    """One of two workers SIGKILLed with calls in flight: its leases come back after the lease
    timeout, its repetitions run again elsewhere, every (task, repeat) is recorded once, and
    the provider never sees more than the limit."""
    async with (
        async_local_cluster(threads=10) as cluster,
        Client(cluster, asynchronous=True) as client,
    ):
        pids = await client.run(os.getpid)
        victim = pids[sorted(pids)[0]]
        killer = KillAfter(victim, after=10)
        bench = Sums(sim, settings=Settings(max_concurrent_llm_calls=5, max_concurrent_tasks=10))
        bench.callbacks.append(killer)
        tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(50)]
        results = tmp_path / "results.jsonl"
        backend = DaskBackend(cluster.scheduler_address, lease_timeout=LEASE_TIMEOUT_S)
        with anyio.fail_after(60):
            reports = await bench.run(tasks, backend=backend, results_path=results)
        finished = time.monotonic()
    assert killer.killed_at, "the worker was never killed"
    records, damaged = read_records(results)
    pairs = [(r["task_id"], r["repeat_idx"]) for r in records[1:]]
    assert damaged == 0 and sorted(pairs) == sorted((t.id, 0) for t in tasks)
    assert {r["status"] for r in reports} == {"success"}
    served = stats(sim)
    assert served["max_in_flight"] <= 5, served
    # the run went on after the kill: it did not wait for more than a few lease timeouts
    assert finished - killer.killed_at < 3 * LEASE_TIMEOUT_S


class LateSums(Sums):
    """t0 calls at once; every other task waits `late_s` first."""

    late_s = 0.3

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        [agent], _ = await super().setup_agents(agent_data, environment, task, user)
        late = task.id != "t0"

        async def later(query: str) -> str:
            if late:
                await anyio.sleep(self.late_s)
            return str(await agent(query))

        return [later], {}


async def test_a_429_on_one_worker_pauses_every_worker(
    cluster: LocalCluster, tmp_path: Path, event_log: EventLog
) -> None:
    """Every first attempt gets a 429 with Retry-After 1.2 s. t0's, alone at the provider, pauses
    the endpoint; the other tasks ask 0.3 s later, on both workers, and none of them sends
    before the pause is over."""
    url, process = start_sim_server(
        "--latency", "0.01", "--fail-first", "1", "--fail-first-status", "429",
        "--retry-after", "1.2",
    )  # fmt: skip
    try:
        settings = Settings(
            max_concurrent_llm_calls=5, retry_initial_delay=0.01, retry_max_attempts=5
        )
        tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(12)]
        reports = await LateSums(url, settings=settings).run(
            tasks, backend=DaskBackend(cluster.scheduler_address)
        )
    finally:
        stop_sim_server(process)
    assert {r["status"] for r in reports} == {"success"}
    events = event_log.all()
    (first_429,) = [e for e in events if e["event"] == "retry" and e["task_id"] == "t0"]
    paused_at = _seconds(first_429["timestamp"])
    others = [e for e in events if e["event"] == "acquired" and e["task_id"] != "t0"]
    assert len({e["worker"] for e in others}) == 2
    early = [e for e in others if _seconds(e["timestamp"]) < paused_at + 1.2 - 0.2]
    assert not early, early


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_run_whose_caller_is_killed_finishes_with_resume(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """`asynceval run --dask` SIGKILLed with reports on disk; `--resume` on the cluster finishes
    the run: every task recorded once, and the provider never saw more than the limit."""
    url, process = start_sim_server("--latency", "0.3")
    target = Path(__file__).parents[2] / "examples" / "frameworks" / "openai_sdk_async.py"
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "asynceval", "run", str(target), "--dask", cluster.scheduler_address,
        "--base-url", url, "--max-concurrent-llm-calls", "2", "--quiet",
    ]  # fmt: skip
    try:
        first = subprocess.Popen([*command, "--out", str(out)], cwd=tmp_path)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and first.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 4:
                first.kill()
                break
            time.sleep(0.05)
        assert first.wait(10) == -signal.SIGKILL, "the run ended before it could be killed"
        before = len(read_records(results)[0]) - 1
        done = subprocess.run(
            [*command, "--resume", str(out)], cwd=tmp_path, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        served = stats(url)
    finally:
        stop_sim_server(process)
    records, _ = read_records(results)
    reports = [r for r in records if r.get("type") != "header"]
    pairs = [(r["task_id"], r["repeat_idx"]) for r in reports if r["status"] == "success"]
    assert 3 <= before < 20 and len(pairs) == len(set(pairs)) == 20
    assert served["max_in_flight"] <= 2, served


async def test_requests_per_minute_hold_across_workers(
    cluster: LocalCluster, sim: str, tmp_path: Path
) -> None:
    """LLM_REQUESTS_PER_MINUTE=8 on two workers: the provider gets 8 requests in the first
    minute, not 8 per worker; the rest wait (here until their 1.5 s task timeout)."""
    settings = Settings(max_concurrent_llm_calls=5, llm_requests_per_minute=8, task_timeout=1.5)
    tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(16)]
    reports = await Sums(sim, settings=settings).run(
        tasks, backend=DaskBackend(cluster.scheduler_address)
    )
    statuses = sorted(r["status"] for r in reports)
    assert statuses == ["success"] * 8 + ["task_timeout"] * 8, statuses
    assert stats(sim)["requests"] == 8


def test_ctrl_c_at_the_caller_cancels_the_clusters_work_and_keeps_reports(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    url, process = start_sim_server("--latency", "0.5")
    target = Path(__file__).parents[2] / "examples" / "frameworks" / "openai_sdk_async.py"
    out = tmp_path / "out"
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "asynceval", "run", str(target), "--dask",
             cluster.scheduler_address, "--base-url", url, "--max-concurrent-llm-calls", "2",
             "--quiet", "--out", str(out)],
            cwd=tmp_path, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and run.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 3:
                run.send_signal(signal.SIGINT)
                break
            time.sleep(0.05)
        _, stderr = run.communicate(timeout=30)
    finally:
        stop_sim_server(process)
    assert run.returncode == 130, stderr
    assert "interrupted:" in stderr and "--resume" in stderr
    records, damaged = read_records(results)
    assert damaged == 0 and len(records) - 1 >= 2
    with Client(cluster) as client:  # nothing of the run is left on the cluster
        left = client.run_on_scheduler(
            lambda dask_scheduler: [str(key) for key in dask_scheduler.tasks]
        )
        # nor running on a worker (Dask does not stop a task that executes: the run's end does)
        # (the run had seconds of work left; stopped, it is gone within about one call)
        deadline, executing = time.monotonic() + 2, {"?": 1}
        while time.monotonic() < deadline and any(executing.values()):
            executing = client.run(lambda dask_worker: len(dask_worker.state.executing))
            time.sleep(0.1)
    assert not [key for key in left if "asynceval" in key], left
    assert not any(executing.values()), executing


async def test_workers_with_one_thread_still_run_many_repetitions_at_once(sim: str) -> None:
    """`dask worker --nthreads 1`: a worker runs one Dask task at a time, but the repetitions
    travel in batches, so the provider still sees the limit's worth of calls at once."""
    settings = Settings(max_concurrent_llm_calls=8, max_concurrent_tasks=8)
    async with async_local_cluster(threads=1) as cluster:
        reports = await Sums(sim, settings=settings).run(
            [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(32)],
            backend=DaskBackend(cluster.scheduler_address),
        )
    assert {r["status"] for r in reports} == {"success"}
    served = stats(sim)
    assert 6 <= served["max_in_flight"] <= 8, served


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("local:0", "--dask local:N needs a number of workers >= 1, got 'local:0'"),
        ("local:two", "--dask local:N needs a number of workers >= 1, got 'local:two'"),
    ],
)
def test_a_bad_dask_option_is_one_line(spec: str, message: str, tmp_path: Path) -> None:
    """(An unreachable address is one line too, after Dask's 10 s of connection attempts.)"""
    target = Path(__file__).parents[2] / "examples" / "arithmetic.py"
    done = subprocess.run(
        [sys.executable, "-m", "asynceval", "run", str(target), "--dask", spec, "--quiet",
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


async def test_agent_data_the_cluster_cannot_take_ends_the_run_with_one_error(
    cluster: LocalCluster, sim: str
) -> None:
    """Repetitions that cannot be sent (their agent_data does not pickle) end the run with one
    BackendLost naming the cause, at once; nothing hangs."""
    bench = Sums(sim, settings=Settings(max_concurrent_llm_calls=5))
    tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(6)]
    with anyio.fail_after(30), pytest.raises(BackendLost, match="could not run repetitions"):
        await bench.run(
            tasks,
            agent_data={"lock": threading.Lock()},
            backend=DaskBackend(cluster.scheduler_address),
        )
