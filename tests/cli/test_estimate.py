"""`asynceval estimate`: a sample run projected onto the whole run, checked against the real run
on the simulated provider (deterministic for a given sample), and its one-line refusals."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from asynceval.cli import main
from asynceval.cli._estimate_replay import Limits, Phase, Template, replay
from asynceval.cli._estimate_sample import draw
from asynceval.cli._estimate_stats import project, t_975
from asynceval.engine import Task, read_records

from ._shell import asynceval

ROOT = Path(__file__).parents[2]
ARITHMETIC = str(ROOT / "examples" / "arithmetic.py")
COUNTS = ("llm_calls", "prompt_tokens", "completion_tokens", "cost_usd")


def real_totals(out: Path) -> dict[str, float]:
    """What the real run in `out` used, summed over its reports, and its wall time."""
    records, _ = read_records(out / "results.jsonl")
    usage = [r["usage"] for r in records if r.get("type") != "header"]
    totals = {name: float(sum(u.get(name) or 0 for u in usage)) for name in COUNTS}
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    return {**totals, "wall_time_s": float(finished["duration_s"]), "reports": len(usage)}


def estimate_json(*options: str, cwd: Path) -> tuple[dict[str, Any], str]:
    done = asynceval("estimate", *options, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def holds(value: float, quantity: dict[str, float]) -> bool:
    """`value` within the interval, up to float rounding (a sum made in another order)."""
    slack = 1e-9 * max(1.0, abs(value))
    return quantity["low"] - slack <= value <= quantity["high"] + slack


@pytest.fixture(scope="module")
def real_arithmetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    folder = tmp_path_factory.mktemp("real")
    done = asynceval("run", ARITHMETIC, "--out", "real", "--quiet", cwd=folder)
    assert done.returncode == 0, done.stderr
    return real_totals(folder / "real")


def test_the_estimate_from_a_sample_of_20_holds_the_real_run(
    tmp_path: Path, real_arithmetic: dict[str, float]
) -> None:
    """40 repetitions, 20 run: calls, tokens and cost within 15% of the real run and inside
    their 95% intervals; the wall time within a looser bound (the machine's load varies)."""
    found, said = estimate_json(ARITHMETIC, "--sample", "20", "--seed", "1", cwd=tmp_path)
    assert "running 20 of the run's 40 repetitions" in said
    assert found["repetitions"] == 40 and found["sample"] == 20 and found["seed"] == 1
    for name in COUNTS:
        real, guess = real_arithmetic[name], found[name]
        assert abs(guess["estimate"] - real) <= 0.15 * real, (name, guess, real)
        assert holds(real, guess), (name, guess, real)
    assert found["llm_calls"]["low"] == found["llm_calls"]["high"] == 40  # one call each, always
    wall = found["wall_time_s"]
    assert 0.5 * wall["estimate"] <= real_arithmetic["wall_time_s"] <= 2 * wall["estimate"]
    (kept,) = (tmp_path / "results").iterdir()  # the sample is a run directory, as run makes
    assert kept.name.startswith("arithmetic-") and (kept / "run.json").is_file()
    assert found["run_directory"] == str(Path("results") / kept.name)


def test_a_sample_larger_than_the_run_runs_all_of_it_and_the_interval_collapses(
    tmp_path: Path, real_arithmetic: dict[str, float]
) -> None:
    found, said = estimate_json(ARITHMETIC, "--sample", "100", "--seed", "3", cwd=tmp_path)
    assert "running 40 of the run's 40 repetitions" in said
    assert found["sample"] == found["repetitions"] == 40
    for name in COUNTS:
        quantity = found[name]
        assert quantity["low"] == quantity["estimate"] == quantity["high"], name
        assert quantity["estimate"] == pytest.approx(real_arithmetic[name], rel=1e-9), name
    wall = found["wall_time_s"]  # measured; a second run varies by the replay's model error
    assert wall["low"] <= wall["estimate"] == found["sample_run"]["wall_time_s"] <= wall["high"]


def test_a_model_without_a_price_is_unknown_never_zero(tmp_path: Path) -> None:
    options = (ARITHMETIC, "--sample", "4", "--seed", "1", "--model", "no-such-model")
    found, said = estimate_json(*options, cwd=tmp_path)
    assert found["cost_usd"] is None and found["unpriced_models"] == ["no-such-model"]
    assert found["unpriced_calls"]["estimate"] == 40
    assert "'no-such-model' has no price" in said
    table = asynceval("estimate", *options, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    line = next(row for row in table.stdout.splitlines() if "cost (USD)" in row)
    assert "unknown" in line and "no-such-model" in line and "$0" not in line


def test_keep_writes_the_sample_run_to_the_folder_given(tmp_path: Path) -> None:
    done = asynceval("estimate", ARITHMETIC, "--sample", "3", "--keep", "kept", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records, _ = read_records(tmp_path / "kept" / "results.jsonl")
    assert len(records) == 1 + 3 and (tmp_path / "kept" / "events.jsonl").is_file()
    assert "whole run" in done.stdout and "40 repetitions (40 tasks x 1 repeat)" in done.stdout


@pytest.mark.parametrize(
    "options",
    [
        ["--sample", "x"],
        ["--sample", "1"],
        ["--seed", "z"],
        ["--repeats", "auto", "--ci-width", "0.1"],
        ["--repeats", "0"],
        ["--ci-width", "0.1"],
        ["--max-concurrent-llm-calls", "abc"],
        ["--max-cost", "-1"],
        ["--dask", "local"],
        ["--keep", __file__],
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = main(["estimate", ARITHMETIC, *options])
    except SystemExit as exc:  # argparse's own refusals
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("asynceval estimate: "), err


def test_a_missing_target_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["estimate"])
    assert exited.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def tasks(count: int) -> list[Task]:
    return [Task(query="q", id=f"t{i}") for i in range(count)]


def test_every_pair_is_as_likely_to_be_drawn() -> None:
    """10 tasks x 3 repeats, samples of 5 (fewer than the tasks): each task is drawn in
    proportion, repeat 0 of each; a sample of 13 (more than the tasks) is every task once, and
    one of 25 every task twice (a whole number of repeats per task)."""
    seen = dict.fromkeys((t.id for t in tasks(10)), 0)
    for seed in range(4000):
        sample = draw(tasks(10), 3, 5, random.Random(seed))
        assert sample.size == 5 and sample.repeats_each == 1 and sample.population == 30
        assert len({t.id for t in sample.tasks}) == 5
        for task in sample.tasks:
            seen[task.id] += 1
    expected = 4000 * 5 / 10
    assert all(abs(count - expected) < 0.06 * expected for count in seen.values()), seen
    for size, each in ((13, 1), (25, 2)):
        sample = draw(tasks(10), 3, size, random.Random(0))
        assert len(sample.tasks) == 10 and sample.repeats_each == each
        assert sample.size == 10 * each


def test_a_sample_as_large_as_the_run_is_every_pair() -> None:
    sample = draw(iter(tasks(4)), 2, 20, random.Random(0))
    assert sorted(t.id for t in sample.tasks) == [f"t{i}" for i in range(4)]
    assert sample.repeats_each == 2 and sample.size == sample.population == 8


def test_the_total_and_its_interval() -> None:
    """N times the mean, Student's t with the finite-population correction, nothing below the
    sample's own total."""
    assert t_975(1) == 12.706 and t_975(31) == pytest.approx(2.0395, abs=1e-3)
    assert t_975(1000) == pytest.approx(1.9623, abs=1e-3)
    whole = project([1.0, 2.0, 3.0], 3)
    assert whole.estimate == whole.low == whole.high == 6.0
    part = project([1.0, 2.0, 3.0, 4.0], 8)
    half = t_975(3) * 8 * (1.6666666666666667 / 4) ** 0.5 * (4 / 7) ** 0.5
    assert part.estimate == 20.0 and part.high == pytest.approx(20.0 + half)
    assert project([0.0, 0.0, 10.0], 100).low == 10.0  # never below what the sample measured


def one_call(held: float, think: float = 0.0, tail: float = 0.0) -> Template:
    return Template((Phase(think, (held,)),), tail)


def test_the_replay_shares_slots_and_workers() -> None:
    """Ten one-second calls on 2 slots take 5 s; with 1 worker 10 s; a panel of 4 parallel
    calls on 2 slots takes 2 s; time outside calls overlaps other repetitions' calls."""
    assert replay([one_call(1.0)] * 10, Limits(llm_calls=2, tasks=10))[-1] == pytest.approx(5.0)
    assert replay([one_call(1.0)] * 10, Limits(llm_calls=2, tasks=1))[-1] == pytest.approx(10.0)
    panel = Template((Phase(0.0, (1.0, 1.0, 1.0, 1.0)),), 0.0)
    assert replay([panel], Limits(llm_calls=2, tasks=1))[-1] == pytest.approx(2.0)
    thinking = [one_call(1.0, think=1.0, tail=1.0)] * 4
    assert replay(thinking, Limits(llm_calls=2, tasks=4))[-1] == pytest.approx(4.0)


def test_the_replay_keeps_the_rate_window() -> None:
    """Requests per minute: the budget starts full, a send's share comes back a window (60 s
    plus the limiter's margin) later; 5 calls at 2 a minute end after two windows."""
    ended = replay([one_call(0.1)] * 5, Limits(llm_calls=5, tasks=5, requests_per_minute=2))
    assert ended[-1] == pytest.approx(2 * 60.25 + 0.1)
