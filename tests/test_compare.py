"""`asynceval compare`: pairing, flips, McNemar's p-values, the paired bootstrap interval, and the
command on two real runs."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import pytest

from asynceval.analysis import compare as compare_module
from asynceval.analysis.compare import (
    binomial,
    binomial_half_cdf,
    compare_runs,
    mcnemar,
)
from asynceval.cli import _compare, _report
from asynceval.cli._errors import CLIError
from asynceval.engine import read_records

ARITHMETIC = str(Path(__file__).parents[1] / "examples" / "arithmetic.py")
HEADER = {"type": "header", "started_at_unix": 100.0}


def report(
    task_id: str, repeat: int = 0, passed: bool | None = None, **fields: Any
) -> dict[str, Any]:
    """A success report judged `passed` (or with `fields` such as a status or an eval)."""
    record: dict[str, Any] = {"task_id": task_id, "repeat_idx": repeat, "status": "success"}
    record["eval"] = [] if passed is None else [{"passed": passed}]
    return record | fields


def run_of(outcomes: list[bool], prefix: str = "t") -> list[dict[str, Any]]:
    return [HEADER, *(report(f"{prefix}{i}", 0, ok) for i, ok in enumerate(outcomes))]


def compare_command(*argv: str) -> int:
    """The compare handler called as the CLI would, through a parser of its own."""
    parser = argparse.ArgumentParser(prog="asynceval")
    _compare.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", *argv])
    status: int = args.handler(args)
    return status


def test_mcnemar_p_values_and_flips_of_a_known_table() -> None:
    # 10 pairs: 1 passed in A only, 6 passed in B only, 2 in both, 1 in neither.
    a = run_of([True, False, False, False, False, False, False, True, True, False])
    b = run_of([False, True, True, True, True, True, True, True, True, False])
    comparison = compare_runs(a, b)
    assert comparison.regressed == [("t0", 0)]
    assert comparison.improved == [(f"t{i}", 0) for i in range(1, 7)]
    assert (comparison.both_passed, comparison.both_failed, comparison.n_pairs) == (2, 1, 10)
    # X ~ Binomial(7, 1/2): P(X <= 1) = 8/128, P(X = 1) = 7/128.
    assert comparison.mcnemar_p == pytest.approx(2 * 8 / 128, abs=1e-15)
    assert comparison.mcnemar_mid_p == pytest.approx(2 * 8 / 128 - 7 / 128, abs=1e-15)
    assert (comparison.mean_a, comparison.mean_b) == pytest.approx((0.3, 0.8))
    assert comparison.difference == pytest.approx(0.5)
    assert comparison.a.pass_rate == pytest.approx(0.3) and comparison.b.scored == 10


def test_mcnemar_edge_cases_and_the_log_space_tail_agrees_with_exact_sums(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert mcnemar(0, 0) == (1.0, 1.0)  # no discordant pair: no evidence either way
    assert mcnemar(5, 5) == pytest.approx((1.0, 1.0))
    assert mcnemar(0, 10) == pytest.approx((2 / 1024, 1 / 1024))
    exact = [binomial_half_cdf(1000, k) for k in (3, 470, 500)]
    monkeypatch.setattr(compare_module, "EXACT_TRIALS", 0)
    for k, (cdf, point) in zip((3, 470, 500), exact, strict=True):
        assert binomial_half_cdf(1000, k) == pytest.approx((cdf, point), rel=1e-9, abs=0)
    p, mid_p = mcnemar(500_000, 502_000)  # a million discordant pairs: no overflow
    assert 0 < mid_p < p < 0.1


def test_a_clear_difference_has_an_interval_around_it_that_excludes_zero() -> None:
    rng = random.Random(7)
    a = run_of([rng.random() < 0.5 for _ in range(400)])
    b = run_of([rng.random() < 0.8 for _ in range(400)])
    comparison = compare_runs(a, b)
    assert comparison.interval_method == "paired bootstrap"
    assert comparison.difference_ci95 is not None and comparison.difference is not None
    low, high = comparison.difference_ci95
    assert 0 < low < 0.3 < high  # 0.3: the true difference of the rates drawn from
    assert low < comparison.difference < high
    # The percentile bootstrap of a mean is about mean ± 1.96 standard errors.
    diffs = [
        float(y["eval"][0]["passed"]) - x["eval"][0]["passed"]
        for x, y in zip(a[1:], b[1:], strict=True)
    ]
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)
    assert compare_runs(a, b).difference_ci95 == (low, high)  # a fixed seed: the same each time
    shuffled = [a[0], *random.Random(1).sample(a[1:], 400)]
    assert compare_runs(shuffled, b).difference_ci95 == (low, high)  # not the records' order


def test_a_run_against_itself_differs_by_nothing() -> None:
    a = run_of([True, False, True])
    comparison = compare_runs(a, a)
    assert comparison.difference == 0 and comparison.difference_ci95 == (0.0, 0.0)
    assert comparison.mcnemar_p == 1.0 and not comparison.regressed and not comparison.improved


def test_the_last_report_counts_and_unpaired_or_unscored_pairs_are_listed() -> None:
    a = [
        HEADER,
        report("x", 0, status="unknown_execution_error"),  # failed, then re-run on resume:
        report("x", 1, True),
        report("only-a", 0, True),
        report("timeout-in-b", 0, True),
        report("timeout-in-a", 0, status="task_timeout"),
        report("broken-in-both", 0, status="setup_failed"),
        report("half", 0, eval=[{"score": 0.5}]),
        HEADER,
        report("x", 0, True),  # ...this one counts
    ]
    b = [
        HEADER,
        report("x", 0, False),
        report("x", 1, True),
        report("only-b", 3, False),
        report("timeout-in-b", 0, status="task_timeout"),
        report("timeout-in-a", 0, True),
        report("broken-in-both", 0, status="environment_error"),
        report("half", 0, True),
    ]
    comparison = compare_runs(a, b)
    assert comparison.only_in_a == [("only-a", 0)] and comparison.only_in_b == [("only-b", 3)]
    assert comparison.scored_in_a_only == [("timeout-in-b", 0)]
    assert comparison.scored_in_b_only == [("timeout-in-a", 0)]
    assert comparison.scored_in_neither == [("broken-in-both", 0)]
    assert comparison.n_pairs == 3  # x[0], x[1], half[0]
    assert comparison.regressed == [("x", 0)]
    assert comparison.improved == [("half", 0)]  # 0.5 is not a pass; 1.0 is
    assert comparison.mean_a == pytest.approx(2.5 / 3) and comparison.mean_b == pytest.approx(2 / 3)
    assert comparison.a.runs == 2 and comparison.a.repetitions == 7


def test_without_pairs_there_is_no_interval_and_the_json_form_is_complete() -> None:
    comparison = compare_runs(run_of([True], "a"), run_of([False], "b"))
    assert comparison.n_pairs == 0 and comparison.difference is None
    assert comparison.difference_ci95 is None and comparison.mcnemar_p is None
    data = json.loads(json.dumps(comparison.as_dict()))
    assert data["only_in_a"] == [{"task_id": "a0", "repeat_idx": 0}]
    assert data["only_in_b"] == [{"task_id": "b0", "repeat_idx": 0}]
    assert set(data) == {
        "label_a", "label_b", "a", "b", "n_pairs", "mean_a", "mean_b", "difference",
        "difference_ci95", "interval_method", "resamples", "seed", "both_passed", "both_failed",
        "regressed", "improved", "mcnemar_p", "mcnemar_mid_p", "only_in_a", "only_in_b",
        "scored_in_a_only", "scored_in_b_only", "scored_in_neither", "no_difference_shown",
        "tasks", "reducers",
    }  # fmt: skip


@pytest.mark.parametrize(("n", "p"), [(1, 0.3), (40, 0.05), (1000, 0.3), (100_000, 0.98)])
def test_binomial_draws_have_the_binomial_mean_and_variance(n: int, p: float) -> None:
    rng = random.Random(3)
    draws = [binomial(rng, n, p) for _ in range(20_000)]
    assert all(0 <= d <= n for d in draws)
    sd = math.sqrt(n * p * (1 - p))
    assert statistics.fmean(draws) == pytest.approx(n * p, abs=5 * sd / math.sqrt(20_000))
    assert statistics.variance(draws) == pytest.approx(sd * sd, rel=0.05)


def test_a_hundred_thousand_pairs_take_a_second_or_so() -> None:
    rng = random.Random(5)
    a = run_of([rng.random() < 0.6 for _ in range(100_000)])
    b = run_of([rng.random() < 0.61 for _ in range(100_000)])
    start = time.perf_counter()
    comparison = compare_runs(a, b)
    assert time.perf_counter() - start < 5
    assert comparison.difference_ci95 is not None and comparison.difference is not None
    low, high = comparison.difference_ci95
    assert low < comparison.difference < high and high - low < 0.02


def test_many_distinct_differences_use_the_normal_interval_which_matches_the_bootstrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(9)
    a = [HEADER, *(report(f"t{i}", eval=[{"score": rng.random()}]) for i in range(400))]
    b = [HEADER, *(report(f"t{i}", eval=[{"score": rng.random() ** 0.5}]) for i in range(400))]
    normal = compare_runs(a, b)
    assert normal.interval_method == "normal approximation"
    monkeypatch.setattr(compare_module, "MAX_PER_PAIR", 10**9)
    bootstrap = compare_runs(a, b)
    assert bootstrap.interval_method == "paired bootstrap"
    assert normal.difference_ci95 is not None and bootstrap.difference_ci95 is not None
    assert normal.difference_ci95 == pytest.approx(bootstrap.difference_ci95, abs=0.01)


def test_long_lists_are_cut_short_in_the_table_view() -> None:
    pairs = [(f"t{i}", 0) for i in range(25)]
    assert _compare.shown(pairs).endswith("t19[0] ... and 5 more")
    assert _compare.shown(pairs[:3]) == "t0[0], t1[0], t2[0]"


def _arithmetic_run(tmp_path: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asynceval", "run", ARITHMETIC, "--quiet", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
        env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_compare_two_real_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run A: the arithmetic example twice over. Run B: once over ten of its tasks, three that
    failed in A now expecting A's answer (improved) and two that passed expecting a wrong one
    (regressed)."""
    _arithmetic_run(tmp_path, "--out", "a", "--repeats", "2")
    records, _ = read_records(tmp_path / "a" / "results.jsonl")
    first = {r["task_id"]: r["eval"][0] for r in records[1:] if r["repeat_idx"] == 0}
    failing = sorted(t for t, entry in first.items() if not entry["passed"])[:3]
    passing = sorted(t for t, entry in first.items() if entry["passed"])[:7]
    lines = []
    for task_id in failing + passing:
        left, op, right = re.fullmatch(r"(\d+)([-+*/])(\d+)", task_id).groups()  # type: ignore[union-attr]
        # A's own answer passes (the simulated provider answers the same each time).
        expected = "wrong" if task_id in passing[:2] else first[task_id]["answer"]
        task = {"id": task_id, "query": f"What is {left} {op} {right}?",
                "evaluation_data": {"expected": expected}, "metadata": {"operator": op}}  # fmt: skip
        lines.append(json.dumps(task))
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    _arithmetic_run(tmp_path, "--out", "b", "--repeats", "1", "--tasks", "tasks.jsonl")

    assert (
        compare_command(str(tmp_path / "a"), str(tmp_path / "b" / "results.jsonl"), "--json") == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["improved"] == [{"task_id": t, "repeat_idx": 0} for t in failing]
    assert data["regressed"] == [{"task_id": t, "repeat_idx": 0} for t in sorted(passing[:2])]
    assert data["n_pairs"] == 10 and len(data["only_in_a"]) == 70 and data["only_in_b"] == []
    assert data["difference"] == pytest.approx(0.1)
    # X ~ Binomial(5, 1/2): P(X <= 2) = 16/32, P(X = 2) = 10/32.
    assert (data["mcnemar_p"], data["mcnemar_mid_p"]) == (1.0, pytest.approx(1 - 10 / 32))
    assert data["a"]["repetitions"] == 80 and data["b"]["repetitions"] == 10
    assert compare_command(str(tmp_path / "a"), str(tmp_path / "b")) == 0
    text = capsys.readouterr().out
    assert f"regressed (passed in A, not in B): {sorted(passing[:2])[0]}[0]" in text
    assert "only in A: " in text and "... and 50 more" in text and "+10.0 pp" in text


def test_mistakes_are_one_line_errors_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(report("t", 0, True)) + "\n")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "no-run").mkdir()
    for bad in ("missing.jsonl", "empty.jsonl", "no-run"):
        with pytest.raises(CLIError, match=re.escape(bad)) as raised:
            compare_command(str(good), str(tmp_path / bad))
        assert "\n" not in str(raised.value)

    def unreadable(path: Path) -> NoReturn:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_report, "read_summaries", unreadable)
    with pytest.raises(CLIError, match=r"good\.jsonl: cannot be read"):
        compare_command(str(good), str(good))
