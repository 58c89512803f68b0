"""Summaries of results: percentiles, the Wilson interval, and the latest report per pair."""

from __future__ import annotations

import pytest

from asynceval.analysis import summarize, wilson_interval
from asynceval.analysis.summary import percentile


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (50.0, 95.0)
    assert percentile([3.0], 0.95) == 3.0 and percentile([], 0.5) is None


def test_wilson_interval_matches_the_textbook_value() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_the_latest_report_per_pair_counts_and_failures_are_not_scored() -> None:
    def report(task_id: str, status: str, passed: bool | None = None) -> dict[str, object]:
        evals = [] if passed is None else [{"passed": passed}]
        return {"task_id": task_id, "repeat_idx": 0, "status": status, "eval": evals,
                "timing": {"duration_s": 1.0}, "usage": {"llm_calls": 1}}  # fmt: skip

    records = [
        {"type": "header", "started_at_unix": 100.0},
        report("a", "unknown_execution_error"),  # failed in the first run...
        report("b", "success", passed=False),
        {"type": "header", "started_at_unix": 200.0},
        report("a", "success", passed=True),  # ...then succeeded on resume: this one counts
        report("c", "task_timeout"),
    ]
    summary = summarize(records)
    assert summary.repetitions == 3 and summary.runs == 2
    assert summary.statuses == {"success": 2, "task_timeout": 1}
    assert (summary.scored, summary.passed, summary.timeouts) == (2, 1.0, 1)
    assert summary.llm_calls == 3 and summary.pass_rate == 0.5


def test_a_hand_edited_file_with_numbers_out_of_range_or_wrong_shapes_still_sums_up() -> None:
    """Ints too big for a float, strings for counts, a list for timing: those values are left
    out (not a traceback); the rest still counts."""
    huge = 10**400
    summary = summarize([
        {"type": "header", "started_at_unix": huge},
        {"task_id": "a", "repeat_idx": 0, "status": "success", "eval": [{"score": huge}],
         "usage": "x", "timing": [1]},
        {"task_id": "b", "repeat_idx": 0, "status": "success", "eval": [{"score": 0.5}],
         "usage": {"llm_calls": huge, "retries": 2, "prompt_tokens": "12"},
         "timing": {"duration_s": huge, "finished_at": "z"}},
        {"task_id": "c", "repeat_idx": 0, "status": "success", "eval": [{"passed": True}],
         "usage": {"llm_calls": 3}, "timing": {"duration_s": 2.0}},
    ])  # fmt: skip
    assert (summary.repetitions, summary.scored, summary.passed) == (3, 2, 1.5)
    assert (summary.llm_calls, summary.retries, summary.prompt_tokens) == (3, 2, 0)
    assert summary.duration_p50_s == 2.0 and summary.wall_s is None
    # A list for an id (unhashable as it is): still one pair, the later report counting.
    edited = [{"task_id": ["a"], "repeat_idx": 0, "status": s} for s in ("agent_error", "success")]
    assert summarize(edited).statuses == {"success": 1}
