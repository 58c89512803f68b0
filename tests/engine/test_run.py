"""Benchmark.run end to end: statuses, termination reasons, timeouts, retries and their back-off,
callbacks, registry isolation, task context, the config and usage in reports, the benchmark's
controller, lazy pulling, the number of workers, agent data and cancellation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asynceval import (
    Benchmark,
    BenchmarkCallback,
    OpenAIChatModel,
    Settings,
    Task,
    TaskProtocol,
    TimeoutAction,
    current_context,
)
from asynceval.engine import REPORT_KEYS, TaskQueue, read_records
from asynceval.errors import AgentError, TaskEnvironmentError, UserError
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

from ..conftest import EventLog
from ._benches import Agents


class Scripted(Benchmark):
    """Each task's metadata says what its agent does: answer, raise, hang, sleep..."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: dict[str, int] = {}

    async def setup_environment(self, agent_data: Mapping[str, Any], task: Task) -> Any:
        if task.metadata.get("do") == "env_setup_fails":
            raise RuntimeError("no sandbox")
        return {"log": []}

    async def setup_user(self, agent_data: Any, environment: Any, task: Task) -> Any:
        if task.metadata.get("do") != "user_error":
            return None

        async def user(answer: Any) -> Any:
            raise UserError("the simulated user crashed")

        return user

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        do = task.metadata.get("do", "answer")

        async def agent(query: Any) -> Any:
            self.calls[task.id] = self.calls.get(task.id, 0) + 1
            environment["log"].append(query)
            if do == "agent_error":
                raise AgentError("the agent gave up")
            if do == "environment_error":
                raise TaskEnvironmentError("the sandbox died")
            if do == "unknown":
                raise KeyError("surprise")
            if do == "hang":
                await anyio.sleep(30)
            if do == "slow":
                await anyio.sleep(task.metadata["seconds"])
            return f"answer to {query}"

        return [agent], {"main": agent}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        async def judge(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            if task.metadata.get("do") == "evaluation_fails":
                raise ValueError("judge crashed")
            return {"passed": True}

        async def second(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"score": 1.0}

        return [judge, second]


def task(do: str = "answer", **protocol: Any) -> Task:
    return Task(query=do, id=f"t-{do}", metadata={"do": do}, protocol=TaskProtocol(**protocol))


async def test_report_keys_are_identical_whatever_the_status() -> None:
    tasks = [
        task("answer"),
        task("agent_error"),
        task("environment_error"),
        task("unknown"),
        task("evaluation_fails"),
        task("env_setup_fails"),
        task("user_error"),
        task("hang", timeout_seconds=0.1),
    ]
    reports = {r["task_id"]: r for r in await Scripted().run(tasks)}
    statuses = {tid: r["status"] for tid, r in reports.items()}
    assert statuses == {
        "t-answer": "success",
        "t-agent_error": "agent_error",
        "t-environment_error": "environment_error",
        "t-unknown": "unknown_execution_error",
        "t-evaluation_fails": "evaluation_failed",
        "t-env_setup_fails": "setup_failed",
        "t-user_error": "user_error",
        "t-hang": "task_timeout",
    }
    for report in reports.values():
        assert tuple(report) == REPORT_KEYS
    assert reports["t-answer"]["error"] is None
    assert reports["t-agent_error"]["error"]["type"] == "AgentError"
    assert reports["t-agent_error"]["termination_reason"] is None
    assert reports["t-hang"]["termination_reason"] is None
    failed_eval = reports["t-evaluation_fails"]
    assert failed_eval["eval"][0]["error"]["message"] == "judge crashed"
    assert failed_eval["eval"][1] == {"score": 1.0}  # the other evaluator's result stays
    assert failed_eval["termination_reason"] == "agent_stop"


class Conversation(Benchmark):
    """A user simulator that is satisfied on the turn given in the task's user_data."""

    async def setup_user(self, agent_data: Any, environment: Any, task: Task) -> Any:
        turns = task.user_data["satisfied_on"]
        seen = []

        def user(answer: str) -> dict[str, Any]:  # sync: runs in a worker thread
            seen.append(answer)
            return {"satisfied": len(seen) >= turns, "text": f"more please ({len(seen)})"}

        return user

    def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        def agent(query: Any) -> str:
            return f"reply to {query}"

        return [agent], {"agent": agent}

    async def user_is_satisfied(self, user_response: Any) -> bool:
        return bool(user_response["satisfied"])

    async def agent_is_done(self, answer: Any) -> bool:
        return "STOP" in str(answer)


async def test_termination_reasons_agent_stop_user_stop_and_max_steps() -> None:
    bench = Conversation(max_invocations=3)
    tasks = [
        Task(query="STOP now", id="agent", user_data={"satisfied_on": 99}),
        Task(query="hi", id="user", user_data={"satisfied_on": 2}),
        Task(query="hi", id="steps", user_data={"satisfied_on": 99}),
    ]
    reasons = {r["task_id"]: r["termination_reason"] for r in await bench.run(tasks)}
    assert reasons == {"agent": "agent_stop", "user": "user_stop", "steps": "max_steps"}


async def test_an_async_hang_times_out_promptly_with_partial_traces() -> None:
    class Traced:
        def __init__(self) -> None:
            self.steps: list[str] = []

        def gather_traces(self) -> dict[str, Any]:
            return {"steps": list(self.steps)}

    class Hangs(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
            tracer = self.register("tools", "tracer", Traced())

            async def agent(query: Any) -> Any:
                tracer.steps.append("started")
                await anyio.sleep(60)

            return [agent], {}

    started = time.monotonic()
    (report,) = await Hangs().run([Task(query="q", protocol=TaskProtocol(timeout_seconds=0.3))])
    assert time.monotonic() - started < 0.3 + 0.5
    assert report["status"] == "task_timeout"
    assert report["traces"]["tools"]["tracer"] == {"steps": ["started"], "name": "tracer"}
    assert report["error"]["timeout_s"] == 0.3 and report["error"]["elapsed_s"] >= 0.3


async def test_a_sync_hook_stuck_in_a_thread_times_out_and_keeps_its_thread_counted() -> None:
    """With one thread slot, the abandoned thread still holds it: the next task's sync hook
    cannot start until that thread really returns, so it times out too."""
    release = threading.Event()

    class Stuck(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
            if task.id == "stuck":
                release.wait(10)  # sync, in a worker thread: cancellation cannot stop it
            return [lambda q: q], {}

    timeout = TaskProtocol(timeout_seconds=0.3)
    started = time.monotonic()
    first, second = await Stuck(max_concurrent_tasks=1).run(
        [
            Task(query="q", id="stuck", protocol=timeout),
            Task(query="q", id="next", protocol=timeout),
        ]
    )
    assert time.monotonic() - started < 2 * (0.3 + 0.5)
    assert first["status"] == "task_timeout" and first["error"]["type"] == "TaskTimeoutError"
    assert second["status"] == "task_timeout"  # it waited for the thread slot the whole time
    assert "setup" in second["error"]["message"]
    release.set()
    (after,) = await Stuck(max_concurrent_tasks=1).run([Task(query="q", id="next")])
    assert after["status"] == "success"


async def test_check_timeout_lets_sync_code_stop_at_a_checkpoint() -> None:
    class Checkpoints(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
            def agent(query: Any) -> Any:
                context = current_context()
                assert context is not None and context.remaining is not None
                while True:
                    context.check_timeout()
                    time.sleep(0.01)

            return [agent], {}

    (report,) = await Checkpoints().run(
        [Task(query="q", protocol=TaskProtocol(timeout_seconds=0.2))]
    )
    assert report["status"] == "task_timeout"


@pytest.mark.parametrize(
    ("action", "expected"),
    [(TimeoutAction.SKIP, ("task_timeout", 1)), (TimeoutAction.RETRY, ("task_timeout", 2)),
     (TimeoutAction.EXTEND, ("success", 2))],
)  # fmt: skip
async def test_timeout_actions_run_exactly_one_more_attempt(
    action: TimeoutAction, expected: tuple[str, int], event_log: EventLog
) -> None:
    """The agent needs 0.3 s with a 0.2 s timeout: RETRY fails again, EXTEND (0.4 s) succeeds."""
    bench = Scripted()
    slow = Task(
        query="q",
        metadata={"do": "slow", "seconds": 0.3},
        protocol=TaskProtocol(timeout_seconds=0.2, timeout_action=action),
    )
    (report,) = await bench.run([slow])
    assert (report["status"], report["attempts"]) == expected
    assert bench.calls[slow.id] == expected[1]
    (finished,) = event_log.named("task_finished")  # one per repetition, whatever the attempts
    assert finished["attempts"] == expected[1] and finished["status"] == expected[0]
    retries = event_log.named("task_retry")
    assert [r["reason"] for r in retries] == (
        [] if action is TimeoutAction.SKIP else [f"timeout_action={action.value}"]
    )


async def test_max_retries_reruns_a_repetition_whose_llm_call_failed(event_log: EventLog) -> None:
    """The provider fails each request's first attempt; the call path gives up after one attempt,
    the engine re-runs the repetition, whose identical request then succeeds."""
    model = OpenAIChatModel(
        settings=Settings(retry_max_attempts=1),
        controller=ConcurrencyController(2),
        sim_config=SimConfig(latency=0, fail_first=1, fail_first_status=503, retry_after=0),
    )

    class UsesModel(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
            async def agent(query: Any) -> str:
                return (await model.generate(query)).text

            return [agent], {}

    settings = Settings(retry_initial_delay=0.01, retry_max_delay=0.02)
    async with model:
        reports = await UsesModel(settings=settings).run(
            [
                Task(query="What is 1 + 1?", id="retried", protocol=TaskProtocol(max_retries=1)),
                Task(query="What is 2 + 2?", id="not-retried"),
            ]
        )
    by_id = {r["task_id"]: r for r in reports}
    assert (by_id["retried"]["status"], by_id["retried"]["attempts"]) == ("success", 2)
    assert by_id["retried"]["usage"]["llm_calls"] == 2  # both attempts' calls are counted
    assert by_id["retried"]["usage"]["failed_calls"] == 1
    assert (by_id["not-retried"]["status"], by_id["not-retried"]["attempts"]) == (
        "unknown_execution_error",
        1,
    )
    assert by_id["not-retried"]["error"]["type"] == "LLMCallFailed"


async def test_a_refused_request_is_not_retried_by_the_engine() -> None:
    model = OpenAIChatModel(
        controller=ConcurrencyController(1),
        sim_config=SimConfig(latency=0, fault_rates={400: 1.0}),
    )

    class Asks(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def agent(query: Any) -> Any:
                return (await model.generate(query)).text

            return [agent], {}

    async with model:
        (report,) = await Asks().run([Task(query="q", protocol=TaskProtocol(max_retries=3))])
    assert (report["status"], report["attempts"]) == ("unknown_execution_error", 1)
    assert report["error"]["type"] == "LLMCallFailed"


async def test_infrastructure_retries_back_off() -> None:
    class Flaky(Benchmark):
        attempts = 0

        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def agent(query: Any) -> Any:
                Flaky.attempts += 1
                if Flaky.attempts < 3:
                    raise RuntimeError("transient")
                return "fine"

            return [agent], {}

    settings = Settings(retry_initial_delay=0.1, retry_max_delay=1.0)
    started = anyio.current_time()
    (report,) = await Flaky(settings=settings).run(
        [Task(query="q", protocol=TaskProtocol(max_retries=2))]
    )
    assert (report["status"], report["attempts"]) == ("success", 3)
    assert anyio.current_time() - started >= 0.1 + 0.2  # 0.1 s, then 0.2 s (plus jitter)


class Recorder(BenchmarkCallback):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.active = 0
        self.overlap = False

    async def _note(self, hook: str, detail: Any) -> None:
        self.active += 1
        self.overlap |= self.active > 1
        await anyio.sleep(0.001)  # a slow async callback: calls must still not overlap
        self.calls.append((hook, detail))
        self.active -= 1

    async def on_run_start(self, benchmark: Benchmark) -> None:
        await self._note("run_start", None)

    async def on_task_selected(self, benchmark: Benchmark, task: Task, queue: TaskQueue) -> None:
        await self._note("selected", task.id)

    async def on_task_start(self, benchmark: Benchmark, task: Task) -> None:
        await self._note("task_start", task.id)

    async def on_task_repeat_start(self, benchmark: Benchmark, task: Task, repeat_idx: int) -> None:
        await self._note("repeat_start", (task.id, repeat_idx))

    async def on_task_repeat_end(self, benchmark: Benchmark, report: Mapping[str, Any]) -> None:
        await self._note("repeat_end", (report["task_id"], report["repeat_idx"]))

    def on_task_end(self, benchmark: Benchmark, task: Task, reports: Sequence[Any]) -> None:
        self.calls.append(("task_end", (task.id, sorted(r["repeat_idx"] for r in reports))))

    def on_queue_decision(self, benchmark: Benchmark, queue: TaskQueue, go_on: bool) -> None:
        self.calls.append(("decision", go_on))

    def on_run_end(self, benchmark: Benchmark, reports: Sequence[Any]) -> None:
        self.calls.append(("run_end", len(reports)))


class Raising(BenchmarkCallback):
    def on_task_repeat_end(self, benchmark: Benchmark, report: Mapping[str, Any]) -> None:
        raise RuntimeError("callback bug")


async def test_callbacks_fire_serialized_and_a_raising_one_does_not_stop_the_run(
    event_log: EventLog,
) -> None:
    recorder = Recorder()
    bench = Scripted(n_task_repeats=3, max_concurrent_tasks=4, callbacks=[Raising(), recorder])
    reports = await bench.run([Task(query="a", id="a"), Task(query="b", id="b")])
    assert len(reports) == 6 and not recorder.overlap
    hooks = [hook for hook, _ in recorder.calls]
    assert hooks[0] == "run_start" and hooks[-1] == "run_end"
    assert hooks.count("selected") == 2 and hooks.count("task_start") == 2
    assert hooks.count("repeat_start") == hooks.count("repeat_end") == hooks.count("decision") == 6
    ends = [detail for hook, detail in recorder.calls if hook == "task_end"]
    assert sorted(ends) == [("a", [0, 1, 2]), ("b", [0, 1, 2])]  # every repetition seen
    failures = event_log.named("callback_failed")
    assert len(failures) == 6 and failures[0]["hook"] == "on_task_repeat_end"


async def test_one_worker_at_a_time_chooses_even_while_a_callback_waits() -> None:
    """A callback that waits inside the choice (on_task_selected): the other workers do not
    choose meanwhile, so each task's task_start follows its own selected."""
    recorder = Recorder()
    bench = Scripted(max_concurrent_tasks=4, callbacks=[recorder])
    await bench.run([Task(query=name, id=name) for name in "abcdef"])
    chosen = [(hook, task) for hook, task in recorder.calls if hook in ("selected", "task_start")]
    assert chosen == [(hook, name) for name in "abcdef" for hook in ("selected", "task_start")]


async def test_registries_are_isolated_between_concurrent_repetitions() -> None:
    class Box:
        def __init__(self, value: str) -> None:
            self.value = value

        def gather_traces(self) -> dict[str, Any]:
            return {"value": self.value}

        def gather_config(self) -> dict[str, Any]:
            raise RuntimeError("config unavailable")

    class Boxes(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            box = self.register("tools", "box", Box(task.id))
            assert self.register("tools", "box", box) is box  # same key again: fine
            with pytest.raises(ValueError, match="already registered as 'tools:box'"):
                self.register("tools", "other", box)

            async def agent(query: Any) -> Any:
                await anyio.sleep(0.01)  # overlap with the other repetitions
                return query

            return [agent], {}

    reports = await Boxes(max_concurrent_tasks=10).run(
        [Task(query=i, id=str(i)) for i in range(10)]
    )
    for report in reports:
        assert report["traces"]["tools"]["box"]["value"] == report["task_id"]
        assert report["config"]["tools"]["box"]["error"] == "config unavailable"


async def test_gather_config_may_use_attributes_set_after_init() -> None:
    class WithModel(Agents):
        def __init__(self) -> None:
            super().__init__()
            self.model_name = "judge-7b"

        def gather_config(self) -> dict[str, Any]:
            return {**super().gather_config(), "model": self.model_name}

    (report,) = await WithModel().run([Task(query="q")])
    assert report["config"]["benchmark"]["model"] == "judge-7b"


async def test_generate_sync_calls_from_a_sync_agent_are_in_the_report_usage() -> None:
    model = OpenAIChatModel(controller=ConcurrencyController(2), sim_config=SimConfig(latency=0))

    class SyncAgent(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:  # type: ignore[override]
            def agent(query: Any) -> Any:  # runs in a worker thread
                return [model.generate_sync(f"What is {n} + 1?").text for n in range(3)]

            return [agent], {}

    async with model:
        (report,) = await SyncAgent().run([Task(query="q")])
    assert report["status"] == "success" and report["usage"]["llm_calls"] == 3


async def test_a_benchmark_controller_bounds_the_calls_of_models_without_their_own() -> None:
    """Benchmark(controller=...) replaces the runtime's limiter for that run's models."""
    controller = ConcurrencyController(3)
    model = OpenAIChatModel(sim_config=SimConfig(latency=0))

    class Calls(Benchmark):
        async def setup_agents(self, agent_data: Any, env: Any, task: Task, user: Any) -> Any:
            async def agent(query: Any) -> str:
                return (await model.generate(str(query))).text

            return [agent], {}

    reports = await Calls(controller=controller).run(
        [Task(query="q", id=f"t{i}") for i in range(4)]
    )
    assert all(r["status"] == "success" for r in reports)
    assert controller.statistics().granted == 4


async def test_tasks_are_pulled_lazily_as_slots_free() -> None:
    pulled = 0
    done = 0

    def endless() -> Iterator[Task]:
        nonlocal pulled
        for index in range(2_000):
            pulled += 1
            assert pulled <= done + 4 + 1, "the scheduler ran ahead of its slots"
            yield Task(query=index, id=str(index))

    class Count(BenchmarkCallback):
        def on_task_repeat_end(self, benchmark: Benchmark, report: Any) -> None:
            nonlocal done
            done += 1

    class Quick(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
            async def agent(query: Any) -> Any:
                await anyio.lowlevel.checkpoint()
                return query

            return [agent], {}

    reports = await Quick(max_concurrent_tasks=4, callbacks=[Count()]).run(endless(), collect=False)
    assert reports == [] and done == 2_000


class CountsTasks(Agents):
    """Its agent counts the event loop's tasks while it runs."""

    alive: list[int]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        import asyncio

        async def agent(query: Any) -> Any:
            self.alive.append(len(asyncio.all_tasks()))
            await anyio.lowlevel.checkpoint()
            return "ok"

        return [agent], {}


async def test_a_huge_max_concurrent_tasks_starts_no_more_workers_than_repetitions() -> None:
    """A million allowed at once for six repetitions: six workers, not a million (which took
    most of a minute and gigabytes before any repetition started)."""
    bench = CountsTasks(max_concurrent_tasks=1_000_000, n_task_repeats=2)
    bench.alive = []
    with anyio.fail_after(60):  # a safety net only: the count below is the check
        reports = await bench.run([Task(query=i, id=str(i)) for i in range(3)])
    assert max(bench.alive) < 20  # six workers, the test's own task and a few of the run's
    assert sorted((r["task_id"], r["repeat_idx"]) for r in reports) == [
        (str(i), r) for i in range(3) for r in range(2)
    ]


async def test_agent_data_one_for_all_or_one_per_task() -> None:
    class Echo(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
            return [lambda query: agent_data["name"]], {}

    tasks = [Task(query=1, id="x"), Task(query=2, id="y")]
    shared = await Echo().run(tasks, agent_data={"name": "same"})
    per_task = await Echo().run(tasks, agent_data=[{"name": "first"}, {"name": "second"}])
    assert [r["traces"] is not None for r in shared] == [True, True]
    answers = {r["task_id"]: r["eval"] for r in per_task}
    assert answers == {"x": [], "y": []}  # no evaluators: an empty list, not None
    with pytest.raises(ValueError, match="agent_data has 1 entries for 2 tasks"):
        await Echo().run(tasks, agent_data=[{"name": "only one"}])


async def test_agent_data_per_task_reaches_its_own_task() -> None:
    seen: dict[str, str] = {}

    class Echo(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            seen[task.id] = agent_data["name"]
            return [lambda query: query], {}

    tasks = [Task(query=1, id="x"), Task(query=2, id="y")]
    await Echo(max_concurrent_tasks=2).run(
        tasks, agent_data=[{"name": "first"}, {"name": "second"}]
    )
    assert seen == {"x": "first", "y": "second"}
    await Echo().run(tasks, agent_data={"name": "same"})
    assert seen == {"x": "same", "y": "same"}


async def test_cancelling_a_run_ends_it_cleanly_with_every_finished_report_on_disk(
    event_log: EventLog, tmp_path: Path
) -> None:
    bench = Scripted(max_concurrent_tasks=2)
    tasks = [
        Task(query="q", id=f"s{i}", metadata={"do": "slow", "seconds": 0.1}) for i in range(20)
    ]
    path = tmp_path / "results.jsonl"
    with anyio.move_on_after(0.35):
        await bench.run(tasks, results_path=path)
    (finished,) = event_log.named("run_finished")
    assert finished["interrupted"] is True
    done = sum(finished["counts"].values())
    assert 4 <= done <= 8 and finished["written"] == done
    records, damaged = read_records(path)
    assert damaged == 0 and len(records) == 1 + done  # the header, then each finished report
    started = {e["task_id"] for e in event_log.named("task_started")}
    assert len(started) == done + 2  # the two in flight were cancelled, leaving no report


def test_run_sync_works_from_a_script() -> None:
    reports = Scripted().run_sync([task("answer")])
    assert reports[0]["status"] == "success"


async def test_run_sync_works_inside_a_running_event_loop() -> None:
    """As in a notebook: the run gets its own thread and event loop."""
    reports = Scripted().run_sync([task("answer")])
    assert reports[0]["status"] == "success"


async def test_evaluators_run_at_the_same_time() -> None:
    """Each evaluator waits until all three have started: only concurrent evaluation finishes."""
    started = 0
    everyone = anyio.Event()

    def evaluator_named(name: str) -> Any:
        async def evaluator(task: Task, answer: Any, traces: Any) -> dict[str, str]:
            nonlocal started
            started += 1
            if started == 3:
                everyone.set()
            with anyio.fail_after(2):
                await everyone.wait()
            return {"evaluator": name}

        return evaluator

    class Three(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            return [lambda query: query], {}

        async def setup_evaluators(
            self, environment: Any, task: Task, agents: Any, user: Any
        ) -> Any:
            return [evaluator_named(name) for name in ("a", "b", "c")]

    (report,) = await Three().run([Task(query="q")])
    assert report["status"] == "success"
    assert [entry["evaluator"] for entry in report["eval"]] == ["a", "b", "c"]
