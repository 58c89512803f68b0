"""`asynceval run --lane flex`: the same answers as live at half the simulated provider's price,
the lane recorded in run.json and kept by a resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynceval.cli import main

ROOT = Path(__file__).parents[2]


def _reports(out: Path) -> list[dict[str, object]]:
    lines = (out / "results.jsonl").read_text().splitlines()[1:]
    return sorted((json.loads(line) for line in lines), key=lambda r: str(r["task_id"]))


def test_a_flex_run_answers_as_live_at_half_the_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = str(ROOT / "examples" / "arithmetic.py")
    assert main(["run", example, "--out", str(tmp_path / "live"), "--quiet"]) == 0
    flex = tmp_path / "flex"
    assert main(["run", example, "--out", str(flex), "--quiet", "--lane", "flex"]) == 0
    live_reports, flex_reports = _reports(tmp_path / "live"), _reports(flex)
    assert [r["eval"] for r in live_reports] == [r["eval"] for r in flex_reports]
    live_cost = sum(r["usage"]["cost_usd"] for r in live_reports)  # type: ignore[index]
    flex_cost = sum(r["usage"]["cost_usd"] for r in flex_reports)  # type: ignore[index]
    assert flex_cost == pytest.approx(live_cost / 2)
    manifest = json.loads((flex / "run.json").read_text())
    assert manifest["how"]["lane"] == "flex"
    assert (
        json.loads((flex / "results.jsonl").read_text().splitlines()[0])["settings"]["llm_lane"]
        == "flex"
    )


def test_an_estimate_in_the_batch_lane_costs_half_and_says_its_wall_time_is_not_a_bound(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BATCH_LINGER", "0.1")
    monkeypatch.setenv("LLM_BATCH_POLL", "0.1")
    example = str(ROOT / "examples" / "arithmetic.py")
    costs = {}
    for lane in ("live", "batch"):
        assert main(["estimate", example, "--sample", "40", "--json", "--lane", lane]) == 0
        out = capsys.readouterr().out
        costs[lane] = json.loads(out)["cost_usd"]["estimate"]
    assert costs["batch"] == pytest.approx(costs["live"] / 2)
    assert main(["estimate", example, "--sample", "10", "--lane", "batch"]) == 0
    assert "wall time in the batch lane" in capsys.readouterr().out
