"""`asynceval run --repeats auto --ci-width W --max-repeats N`: the one-line refusals (exit 2),
the summary's line on why the rule stopped, run.json recording the rule, and `--resume DIR`
going on by the same rule (no LLM: tests/cli/coins_bench.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from asynceval.engine import read_records

from ._shell import asynceval

BENCH = str(Path(__file__).parent / "coins_bench.py")


def per_task(out: Path) -> Counter[str]:
    records, _ = read_records(out / "results.jsonl")
    return Counter(r["task_id"] for r in records if "task_id" in r)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--repeats", "auto"], "--repeats auto needs --ci-width W"),
        (["--repeats", "x"], "--repeats must be a whole number >= 1 or auto, got x"),
        (["--repeats", "0"], "--repeats must be >= 1, got 0"),
        (["--ci-width", "0.1"], "--ci-width goes with --repeats auto only"),
        (["--repeats", "3", "--max-repeats", "4"], "--max-repeats goes with --repeats auto only"),
        (["--repeats", "auto", "--ci-width", "0"], "--ci-width must be a number in (0, 0.5]"),
        (["--repeats", "auto", "--ci-width", "0.6"], "--ci-width must be a number in (0, 0.5]"),
        (["--repeats", "auto", "--ci-width", "wide"], "got wide"),
        (
            ["--repeats", "auto", "--ci-width", "0.1", "--max-repeats", "1"],
            "--max-repeats must be a whole number >= 2, got 1",
        ),
    ],
)
def test_bad_adaptive_options_are_one_line_and_exit_2(
    tmp_path: Path, options: list[str], message: str
) -> None:
    result = asynceval("run", BENCH, *options, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "run").exists()


def test_repeats_auto_stops_at_the_width_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = asynceval(
        "run", BENCH, "--repeats", "auto", "--ci-width", "0.1", "--max-repeats", "30",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "adaptive repeats: stopped (ci_width_reached)" in result.stdout
    counts = per_task(out)
    assert set(counts) == {f"t{i}" for i in range(8)} and max(counts.values()) < 30
    assert sum(counts[f"t{i}"] for i in range(4, 8)) > sum(counts[f"t{i}"] for i in range(4))
    options = json.loads((out / "run.json").read_text())["computes"]["options"]
    assert (options["repeats"], options["ci_width"], options["max_repeats"]) == ("auto", 0.1, 30)
    finished = [
        json.loads(line)
        for line in (out / "events.jsonl").read_text().splitlines()
        if '"run_finished"' in line
    ]
    assert finished[-1]["adaptive"]["stopped"] == "ci_width_reached"


def test_resume_continues_the_rule_and_keeps_its_options(tmp_path: Path) -> None:
    """A run stopped by its --max-repeats is resumed from run.json alone: the same rule, the
    repetitions on disk counted; a different --ci-width on resume is refused."""
    out = tmp_path / "run"
    first = asynceval(
        "run", BENCH, "--repeats", "auto", "--ci-width", "0.05", "--max-repeats", "2",
        "--out", str(out), "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert per_task(out) == {f"t{i}": 2 for i in range(8)}
    refused = asynceval("run", "--resume", str(out), "--ci-width", "0.2", cwd=tmp_path)
    assert refused.returncode == 2
    assert "--ci-width 0.2 differs from the run's 0.05" in refused.stderr
    again = asynceval("run", "--resume", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert per_task(out) == {f"t{i}": 2 for i in range(8)}  # the same rule: nothing to add
    assert "adaptive repeats: stopped (max_repeats)" in again.stdout
    records, _ = read_records(out / "results.jsonl")
    pairs = [(r["task_id"], r["repeat_idx"]) for r in records if "task_id" in r]
    assert len(pairs) == len(set(pairs))


def test_resume_after_a_kill_goes_on_until_the_width(tmp_path: Path) -> None:
    """A run killed after the first repetition of each task (its results file cut there, as a
    kill -9 leaves it): `--resume DIR` counts those and goes on until the half-width is <= W."""
    out = tmp_path / "run"
    whole = asynceval(
        "run", BENCH, "--repeats", "auto", "--ci-width", "0.1", "--max-repeats", "30",
        "--out", str(out), "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    first_reports = [line for line in lines[1:] if '"repeat_idx": 0' in line]
    (out / "results.jsonl").write_text(lines[0] + "".join(first_reports))
    assert sum(per_task(out).values()) == 8
    resumed = asynceval("run", "--resume", str(out), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "adaptive repeats: stopped (ci_width_reached)" in resumed.stdout
    counts = per_task(out)
    assert sum(counts.values()) > 8 and max(counts.values()) < 30
    records, _ = read_records(out / "results.jsonl")
    for task_id, n in counts.items():
        indexes = sorted(r["repeat_idx"] for r in records if r.get("task_id") == task_id)
        assert indexes == list(range(n))
