"""run_id: every event and every report of a run carries it, its header holds it, and each run
(a resumed one too) gets its own."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.engine import read_records
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

from ..conftest import EventLog


class OneCall(Benchmark):
    def __init__(self, model: OpenAIChatModel) -> None:
        super().__init__()
        self.model = model

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            return (await self.model.generate(query)).text

        return [agent], {}


def instant_model() -> OpenAIChatModel:
    """A model on a simulator of its own answering at once, limit 3."""
    return OpenAIChatModel(controller=ConcurrencyController(3), sim_config=SimConfig(latency=0.0))


def tasks(n: int, start: int = 0) -> list[Task]:
    return [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(start, start + n)]


def drop_reports(path: Path, *task_ids: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(x for x in lines if json.loads(x).get("task_id") not in task_ids))


def headers(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_records(path)[0] if r.get("type") == "header"]


async def test_every_event_and_report_of_a_run_carries_its_header_run_id(
    tmp_path: Path, event_log: EventLog
) -> None:
    path = tmp_path / "results.jsonl"
    async with instant_model() as model:
        reports = await OneCall(model).run(tasks(5), results_path=path)
    (header,) = headers(path)
    run_id = header["run_id"]
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", run_id), run_id
    assert [r["run_id"] for r in reports] == [run_id] * 5
    lines = event_log.all()
    names = {e["event"] for e in lines}
    assert {"run_started", "task_started", "queueing", "acquired", "released"} <= names
    assert {"task_finished", "run_finished"} <= names
    assert {e.get("run_id") for e in lines} == {run_id}


async def test_two_runs_and_a_resumed_run_each_get_their_own_run_id(
    tmp_path: Path, event_log: EventLog
) -> None:
    path = tmp_path / "results.jsonl"
    async with instant_model() as model:
        bench = OneCall(model)
        ran = await bench.run(tasks(4), results_path=path)
        first = [r for r in ran if r["task_id"] in ("t0", "t1")]
        drop_reports(path, "t2", "t3")  # as if killed before their reports
        resumed = await bench.run(tasks(4), results_path=path, resume=True)
        elsewhere = await bench.run(tasks(1))
    first_header, resumed_header = headers(path)
    assert first_header["run_id"] != resumed_header["run_id"]
    assert {r["run_id"] for r in first} == {first_header["run_id"]}
    assert {r["run_id"] for r in resumed} == {resumed_header["run_id"]}
    # in the file, the earlier reports keep the first run's id
    by_task = {r["task_id"]: r["run_id"] for r in read_records(path)[0] if "task_id" in r}
    assert by_task == {
        "t0": first_header["run_id"],
        "t1": first_header["run_id"],
        "t2": resumed_header["run_id"],
        "t3": resumed_header["run_id"],
    }
    assert elsewhere[0]["run_id"] not in (first_header["run_id"], resumed_header["run_id"])
    started = [e["run_id"] for e in event_log.named("run_started")]
    assert started == [first_header["run_id"], resumed_header["run_id"], elsewhere[0]["run_id"]]
