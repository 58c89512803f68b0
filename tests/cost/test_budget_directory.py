"""The budget belongs to the run directory: a resume without --max-cost goes on with what is
left of the run's total, `--resume DIR --max-cost N` makes N the new total (what earlier
segments spent counts against it), a plain resume of a run whose budget ran out starts nothing
and exits 3 with the same line, and `logs check` gives one verdict over all segments. Proven by
outside counts: the sum of `cost_usd` over every `released` event in DIR/events.jsonl, and the
provider's request counter."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval import Settings
from asynceval.cli import main

from ._support import MODEL, PRICE, Calls, events_file, named, price_file, released_cost, tasks

BENCH = str(Path(__file__).parent / "budget_bench.py")


@pytest.fixture
def cli_run(
    tmp_path: Path, sim_server: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], str]:
    """The command line of a run of budget_bench.py on a `sim serve` of its own (priced by a
    price file), and that server's base URL."""
    url = sim_server("--latency", "0.005")
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    monkeypatch.setenv("LLM_PRICES_FILE", str(prices))
    monkeypatch.setenv("MAX_CONCURRENT_LLM_CALLS", "4")
    return ["run", BENCH, "--base-url", url, "--model", MODEL, "--quiet"], url


def requests_served(url: str) -> int:
    return int(httpx.get(url.removesuffix("/v1") + "/stats").json()["requests"])


def segments(out: Path) -> list[list[dict[str, Any]]]:
    """DIR/events.jsonl cut at each run_started: one list of events per segment."""
    found: list[list[dict[str, Any]]] = []
    for event in events_file(out / "events.jsonl"):
        if event["event"] == "run_started":
            found.append([])
        if found:
            found[-1].append(event)
    return found


def test_a_plain_resume_goes_on_with_what_is_left_and_starts_nothing_once_spent(
    tmp_path: Path, cli_run: tuple[list[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    run, url = cli_run
    out = tmp_path / "o8"
    budget = "0.005"  # 7 of the 60 calls
    assert main([*run, "--out", str(out), "--max-cost", budget]) == 3
    (line,) = capsys.readouterr().err.splitlines()
    first_spent = released_cost(events_file(out / "events.jsonl"))
    served = requests_served(url)
    assert 0 < first_spent <= Decimal(budget)

    for _ in range(3):  # each gets nothing afresh: the run's budget ran out
        assert main(["run", "--resume", str(out), "--quiet"]) == 3
        assert capsys.readouterr().err.splitlines() == [line]
    events = events_file(out / "events.jsonl")
    assert released_cost(events) == first_spent <= Decimal(budget)  # the bill over 4 segments
    assert requests_served(url) == served  # no provider call
    for segment in segments(out)[1:]:
        assert not named(segment, "task_started")  # no repetition started
        (finished,) = named(segment, "run_finished")
        assert finished["budget_usd"] == float(budget) and finished["budget_exhausted"]
    manifest = json.loads((out / "run.json").read_text())
    assert [s["how"]["max_cost"] for s in manifest["segments"]] == [float(budget)] * 4

    # One verdict over the four segments, against the run's total.
    assert main(["logs", "check", str(out)]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("budget")]
    assert lines == [f"budget            ${float(first_spent):.6g} of $0.005 over 4 segments: held"]
    # The report's budget line is against the run's total, over its segments.
    assert main(["report", str(out), "--json"]) == 0
    budget_line = json.loads(capsys.readouterr().out)["budget"]
    assert budget_line == {
        "usd": float(budget),
        "spent_usd": float(first_spent),
        "segments": 4,
        "exhausted": True,
    }


def test_max_cost_on_a_resume_is_the_run_s_new_total(
    tmp_path: Path, cli_run: tuple[list[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    run, url = cli_run
    out = tmp_path / "grow"
    assert main([*run, "--out", str(out), "--max-cost", "0.005"]) == 3
    first = released_cost(events_file(out / "events.jsonl"))
    capsys.readouterr()

    # 0.01 in all: the first segment's spending counts against it.
    assert main(["run", "--resume", str(out), "--quiet", "--max-cost", "0.01"]) == 3
    err = capsys.readouterr().err
    total = released_cost(events_file(out / "events.jsonl"))
    assert first < total <= Decimal("0.01")
    assert f"spent ${float(total):.6g} of $0.01;" in err
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["segments"][-1]["how"]["max_cost"] == 0.01

    # A plain resume now carries 0.01 on (not the first segment's 0.005): spent, so nothing.
    served = requests_served(url)
    assert main(["run", "--resume", str(out), "--quiet"]) == 3
    assert released_cost(events_file(out / "events.jsonl")) == total
    assert requests_served(url) == served

    # A total that covers the rest finishes the run, the whole bill within it.
    assert main(["run", "--resume", str(out), "--quiet", "--max-cost", "1"]) == 0
    (finished,) = named(segments(out)[-1], "run_finished")
    assert finished["counts"].get("success", 0) > 0 and not finished["budget_exhausted"]
    assert Decimal(repr(finished["budget_spent_usd"])) == released_cost(
        events_file(out / "events.jsonl")
    )


def _segment(spent: float, budget: float, resumed: bool) -> list[dict[str, Any]]:
    started = {
        "event": "run_started",
        "max_concurrent_llm_calls": 5,
        "max_cost_usd": budget,
        "resumed_pairs": 3 if resumed else 0,
    }
    calls = [
        {"event": "acquired", "call_id": f"c{spent}"},
        {"event": "released", "call_id": f"c{spent}", "cost_usd": spent},
    ]
    finished = {"event": "run_finished", "counts": {}, "budget_usd": budget}
    return [started, *calls, finished]


def test_logs_check_gives_one_verdict_over_the_segments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The review's log: four segments each within $0.002 alone, $0.00534 in all."""
    log = tmp_path / "events.jsonl"
    spends = [0.001346, 0.00134, 0.00134, 0.001314]
    lines = [e for i, s in enumerate(spends) for e in _segment(s, 0.002, resumed=i > 0)]
    log.write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert main(["logs", "check", str(log)]) == 1
    out = capsys.readouterr().out
    budget = [x for x in out.splitlines() if x.startswith("budget")]
    assert budget == [
        "budget            $0.00534 of $0.002 over 4 segments: EXCEEDED "
        "(by segment 2: $0.002686 of $0.002)"
    ]
    assert out.splitlines()[-1] == "VIOLATED"

    # A new total given on a resume: the directory's spending is judged against it.
    lines = [e for i, s in enumerate(spends) for e in _segment(s, 0.006, resumed=i > 0)]
    log.write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert main(["logs", "check", str(log)]) == 0
    assert "budget            $0.00534 of $0.006 over 4 segments: held" in capsys.readouterr().out


async def test_the_api_resume_carries_the_run_s_budget(tmp_path: Path) -> None:
    """`bench.run(..., resume=True)` without max_cost_usd goes on with the total the results
    file's run had, what it spent counted: run out, it starts nothing and sends nothing."""
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    bench = Calls(settings=Settings(llm_prices_file=str(prices), max_concurrent_llm_calls=4))
    results = tmp_path / "results.jsonl"
    await bench.run(tasks(30), results_path=results, max_cost_usd=0.003)
    assert bench.budget is not None and bench.budget.exhausted
    spent = released_cost(events_file(tmp_path / "events.jsonl"))
    sent = bench.sim_stats()["requests"]
    assert 0 < spent <= Decimal("0.003")

    again = await bench.run(tasks(30), results_path=results, resume=True)
    assert bench.budget is not None and bench.budget.exhausted
    assert bench.budget.limit == Decimal("0.003") and bench.budget.spent == spent
    assert len(again) == 0 and bench.sim_stats()["requests"] == sent
    assert released_cost(events_file(tmp_path / "events.jsonl")) == spent

    # A new total: the earlier spending counts against it.
    await bench.run(tasks(30), results_path=results, resume=True, max_cost_usd=0.006)
    assert released_cost(events_file(tmp_path / "events.jsonl")) <= Decimal("0.006")
    assert bench.budget is not None and bench.budget.spent > spent
