"""An event bound for LOG_FILE and for its run's events file is rendered once: both files get
the same line (same timestamp, same bytes), and each still gets every line its level lets in."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from asynceval import (
    Benchmark,
    OpenAIChatModel,
    Settings,
    Task,
    _eventlog,
    configure_logging,
    events,
)
from asynceval._event_output import run_events_file
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig


class OneCall(Benchmark):
    """Each repetition makes one LLM call (W1's shape)."""

    def __init__(self, model: OpenAIChatModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            return (await self.model.generate(query, agent="solver")).text

        return [agent], {}


@pytest.fixture
def distinct_timestamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reading of the events' clock gives a new time: an event rendered twice would carry
    two different timestamps."""
    ticks = itertools.count()
    monkeypatch.setattr(_eventlog, "timestamp", lambda: f"2026-01-01T00:00:00.{next(ticks):06d}Z")


@pytest.mark.anyio
@pytest.mark.usefixtures("distinct_timestamps")
async def test_a_runs_events_are_the_same_lines_in_log_file_and_its_events_file(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "log.jsonl"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    configure_logging(Settings(log_file=str(log_file)))
    config = SimConfig(latency=0.001, latency_distribution="fixed")
    async with OpenAIChatModel(controller=ConcurrencyController(5), sim_config=config) as model:
        tasks = [Task(query=f"What is {i} + {i}?", id=f"t{i}") for i in range(20)]
        await OneCall(model).run(tasks, results_path=run_dir / "results.jsonl", collect=False)
    configure_logging(Settings(), stream=None)  # closes LOG_FILE, its lines written

    in_run = (run_dir / "events.jsonl").read_text().splitlines()
    in_log = log_file.read_text().splitlines()
    names = [json.loads(line)["event"] for line in in_run]
    assert names.count("released") == 20 and names.count("task_finished") == 20
    # Every line of the run's file is in LOG_FILE as it is, in the same order.
    assert [line for line in in_log if line in set(in_run)] == in_run
    # Rendered once each: as many clock readings as lines, no line's time seen twice.
    stamps = [json.loads(line)["timestamp"] for line in in_log]
    assert len(set(stamps)) == len(stamps)


@pytest.mark.usefixtures("distinct_timestamps")
def test_an_event_rendered_for_the_console_still_goes_as_json_to_the_events_file(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "log.txt"
    configure_logging(Settings(log_file=str(log_file), log_format="console"))
    with run_events_file(tmp_path / "events.jsonl"), events.bind_context(run_id="r1"):
        events.emit("probe", n=1)
    configure_logging(Settings(), stream=None)
    line = json.loads((tmp_path / "events.jsonl").read_text())
    assert (line["event"], line["n"], line["run_id"]) == ("probe", 1, "r1")
    assert "probe" in log_file.read_text() and not log_file.read_text().startswith("{")


@pytest.mark.usefixtures("distinct_timestamps")
def test_an_info_event_below_log_files_level_still_reaches_the_events_file(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "log.jsonl"
    configure_logging(Settings(log_file=str(log_file), log_level="WARNING"))
    with run_events_file(tmp_path / "events.jsonl"):
        events.emit("quiet", n=1)
        events.emit("loud", level="warning", n=2)
    configure_logging(Settings(), stream=None)
    in_run = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in in_run] == ["quiet", "loud"]
    assert log_file.read_text().splitlines() == in_run[1:]
