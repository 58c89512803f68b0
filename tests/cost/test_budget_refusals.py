"""A request the budget refuses is no LLM call: it writes no queueing, acquired or released
event, it is not in `usage.llm_calls`, and it holds no slot while it waits for budget room;
its repetition still ends `budget_exhausted`. Counted from outside: the provider's requests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from asynceval import Settings
from asynceval.cli import main
from asynceval.engine import read_records
from asynceval.sim import SimConfig

from ..conftest import EventLog
from ._support import MODEL, Calls, events_file, named, price_file, released_cost, tasks

ROOT = Path(__file__).resolve().parents[2]
DEAR_INPUT = {"input_mtok": 40.0, "output_mtok": 40.0}
"""A price at which a request's worst case (its body's bytes as prompt tokens, plus max_tokens)
is several times what it costs: a budget can hold one call in flight and not two."""


def priced(tmp_path: Path, **extra: Any) -> Settings:
    prices = price_file(tmp_path / "prices.json", {MODEL: DEAR_INPUT})
    return Settings(llm_prices_file=str(prices), **extra)


async def test_refused_calls_are_not_counted_as_calls_nor_given_slot_events(
    tmp_path: Path, event_log: EventLog
) -> None:
    """20 repetitions under a budget that runs out: every `acquired` event is a request the
    provider received, `usage.llm_calls` adds up to the same number, and the refused
    repetitions (budget_exhausted) count no call they did not send."""
    bench = Calls(settings=priced(tmp_path), max_concurrent_tasks=4, calls=2)
    reports = await bench.run(tasks(20), max_cost_usd=0.05)
    statuses = Counter(r["status"] for r in reports)
    assert statuses["budget_exhausted"] >= 1 and statuses["success"] >= 1, statuses
    sent = bench.sim_stats()["requests"]
    assert bench.budget is not None and bench.budget.refused >= 1
    for name in ("queueing", "acquired", "released"):
        assert len(event_log.named(name)) == sent, name
    assert sum(r["usage"]["llm_calls"] for r in reports) == sent
    for report in reports:
        if report["status"] == "success":
            assert report["usage"]["llm_calls"] == 2
        else:
            assert report["usage"]["llm_calls"] <= 1  # its second call, or its first, refused


async def test_a_call_waiting_for_budget_room_holds_no_slot(
    tmp_path: Path, event_log: EventLog
) -> None:
    """Two calls at once whose worst cases do not fit side by side, but do once the first has
    settled at what it cost: the second waits for budget room before it asks for a slot, so
    never more than one slot is held (and both succeed)."""
    bench = Calls(
        settings=priced(tmp_path),
        max_concurrent_tasks=2,
        params={"max_tokens": 200},
        sim=SimConfig(latency=0.1),
    )
    # One call reserves its 200 output tokens plus its body's ~170 bytes as prompt tokens
    # (about $0.015); it costs its ~20 prompt and ~24 completion tokens (about $0.002).
    reports = await bench.run(tasks(2), max_cost_usd=0.02)
    assert [r["status"] for r in reports] == ["success", "success"]
    assert bench.sim_stats()["requests"] == 2
    assert event_log.max_in_flight() == 1
    first_release = next(i for i, e in enumerate(event_log.all()) if e["event"] == "released")
    queued = [i for i, e in enumerate(event_log.all()) if e["event"] == "queueing"]
    assert queued[1] > first_release  # it asked for a slot once the budget had room


def test_the_command_line_counts_only_the_calls_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`asynceval run examples/arithmetic.py --max-cost 0.0008`: the summary's "LLM calls" is
    the number of requests sent (the `released` events with a cost), not those plus the
    refused ones, and the run exits 3."""
    out = tmp_path / "run"
    example = str(ROOT / "examples" / "arithmetic.py")
    assert main(["run", example, "--out", str(out), "--max-cost", "0.0008"]) == 3
    printed = capsys.readouterr().out
    events = events_file(out / "events.jsonl")
    released = named(events, "released")
    assert 0 < len(released) == len(named(events, "acquired")) < 40
    assert 0 < released_cost(events) <= 0.0008
    calls_line = next(line for line in printed.splitlines() if "LLM calls / retries" in line)
    assert calls_line.split("│")[2].strip() == f"{len(released)} / 0", calls_line
    records, damaged = read_records(out / "results.jsonl")
    refused = [r for r in records if r.get("status") == "budget_exhausted"]
    assert damaged == 0 and refused and all(r["usage"]["llm_calls"] == 0 for r in refused)
