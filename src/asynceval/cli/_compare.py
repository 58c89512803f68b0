"""`asynceval compare RUN_A RUN_B`: run B against run A, pair by pair, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._event_output import events_path_for
from ..analysis.compare import Comparison, NotComparable, PairId, check_comparable, compare_runs
from ..analysis.cost import billed_records, budget_rows, comparison_rows, read_billed, total_text
from ..analysis.summary import Summary
from ._errors import CLIError
from ._files import check_results, is_header, is_report
from ._report import add_reducer, load_records, results_file

SHOWN = 20  # pairs listed per kind in the table view; --json lists them all


def add_parser(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare two runs pair by pair",
        description=(
            "Compare run B with run A, repetitions paired by (task_id, repeat_idx): each run's "
            "pass rate, the paired difference B - A with a 95% interval (a paired bootstrap "
            "that resamples tasks) and, with one repetition per task, McNemar's test; each "
            "reducer's difference over tasks; each run's cost and the paired difference in cost "
            "per repetition; the repetitions that flipped, and those present in one run only."
        ),
    )
    compare.add_argument("run_a", help="run A: a run directory or its results.jsonl")
    compare.add_argument("run_b", help="run B: a run directory or its results.jsonl")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.add_argument(
        "--any-benchmark",
        action="store_true",
        help="pair runs whose headers name different benchmarks (a renamed class, two "
        "benchmarks on one task set); without it they are refused",
    )
    add_reducer(compare)
    compare.set_defaults(handler=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    path_a, path_b = results_file(args.run_a), results_file(args.run_b)
    records_a, damaged_a = _results(path_a)
    records_b, damaged_b = _results(path_b)
    label_a, label_b = str(path_a), str(path_b)
    try:
        check_comparable(
            records_a, records_b, label_a=label_a, label_b=label_b, any_benchmark=args.any_benchmark
        )
    except NotComparable as exc:
        raise CLIError(str(exc)) from None
    comparison = compare_runs(
        records_a, records_b, label_a=label_a, label_b=label_b, reducers=args.reducer
    )
    comparison.a.damaged_lines, comparison.b.damaged_lines = damaged_a, damaged_b
    if args.json:
        print(json.dumps({**comparison.as_dict(), "cost": comparison.cost}, indent=2))
    else:
        print_comparison(comparison, sys.stdout)
    return 0


def _results(path: Path) -> tuple[list[dict[str, Any]], int]:
    """(headers and reports, damaged lines) of a results file: a file that is none is a
    CLIError; a line of JSON that is neither a header nor a report counts as damaged; a
    resumed run's reports at their repetitions' bill (`billed_records`)."""
    records, damaged = load_records(path)
    check_results(path, records)
    kept = [record for record in records if is_header(record) or is_report(record)]
    # A resumed run's repetitions cost what their events say every segment paid for them.
    billed = read_billed(Path(events_path_for(path)))
    return billed_records(kept, billed), damaged + len(records) - len(kept)


def _pass_rate(summary: Summary) -> str:
    if summary.pass_rate is None or summary.pass_rate_ci95 is None:
        return f"no scored repetitions of {summary.repetitions}"
    low, high = summary.pass_rate_ci95
    text = f"{summary.pass_rate:.1%} (95% CI {low:.1%}-{high:.1%})"
    if summary.pass_rate_over != "tasks":  # passed/scored is the rate itself only then
        text = f"{summary.passed:g}/{summary.scored} = {text}"
    if summary.repetitions != summary.scored:
        text += f", {summary.repetitions} repetitions"
    return text


def _verdict(ci95: Any) -> str:
    low, high = ci95
    return "no difference shown" if low <= 0.0 <= high else "a difference shown"


def _points(value: float) -> str:
    """A difference of rates in percentage points, with its sign."""
    return f"{value * 100:+.1f} pp"


def _span(low: float, high: float) -> str:
    """'-3.1 to +4.2' (percentage points, as the difference before it says)."""
    return f"{low * 100:+.1f} to {high * 100:+.1f}"


def _paired(comparison: Comparison) -> list[tuple[str, str]]:
    if not comparison.n_pairs:
        return [("paired", "no repetition is scored in both runs")]
    assert comparison.mean_a is not None and comparison.mean_b is not None
    assert comparison.difference is not None and comparison.difference_ci95 is not None
    low, high = comparison.difference_ci95
    over_tasks = "tasks" in (comparison.a.pass_rate_over, comparison.b.pass_rate_over)
    rows = [
        ("pairs scored in both", f"{comparison.n_pairs} in {comparison.tasks} tasks"),
        (
            "mean score A / B" + (" (over tasks)" if over_tasks else ""),
            f"{comparison.mean_a:.1%} / {comparison.mean_b:.1%}",
        ),
        (
            "difference B - A",
            f"{_points(comparison.difference)} (95% CI {_span(low, high)}), "
            + _verdict(comparison.difference_ci95),
        ),
        ("  interval", str(comparison.interval_method)),
        ("improved / regressed", f"{len(comparison.improved)} / {len(comparison.regressed)}"),
    ]
    if comparison.mcnemar_p is not None and comparison.mcnemar_mid_p is not None:
        mcnemar = f"exact {comparison.mcnemar_p:.3g}, mid-p {comparison.mcnemar_mid_p:.3g}"
    else:
        mcnemar = "not shown (several repetitions per task)"
    rows.append(("McNemar p", mcnemar))
    rows.append(("reducers: B - A", "over tasks"))
    for reducer in comparison.reducers:
        rows.append((f"  {reducer['name']}", _reducer(reducer)))
    return rows


def _reducer(reducer: dict[str, Any]) -> str:
    if reducer["difference"] is None:
        return "no task has enough repetitions in both runs"
    low, high = reducer["ci95"]
    return f"{_points(reducer['difference'])} (95% CI {_span(low, high)}), " + _verdict(
        reducer["ci95"]
    )


def _pair_lists(comparison: Comparison) -> list[tuple[str, list[PairId]]]:
    return [
        ("regressed (passed in A, not in B)", comparison.regressed),
        ("improved (passed in B, not in A)", comparison.improved),
        ("only in A", comparison.only_in_a),
        ("only in B", comparison.only_in_b),
        ("scored in A only", comparison.scored_in_a_only),
        ("scored in B only", comparison.scored_in_b_only),
        ("scored in neither", comparison.scored_in_neither),
    ]


def shown(pairs: list[PairId], limit: int = SHOWN) -> str:
    """The first `limit` pairs as `task_id[repeat_idx]`, then how many more there are."""
    text = ", ".join(f"{task_id}[{repeat}]" for task_id, repeat in pairs[:limit])
    return text + (f" ... and {len(pairs) - limit} more" if len(pairs) > limit else "")


def print_comparison(comparison: Comparison, stream: TextIO) -> None:
    """The comparison table, then the pairs of each non-empty kind (plain text when the stream is
    not a terminal)."""
    console = Console(file=stream)
    table = Table(title="asynceval compare", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("A", comparison.label_a),
        ("B", comparison.label_b),
        ("pass rate A", _pass_rate(comparison.a)),
        ("  interval", str(comparison.a.pass_rate_interval or "-")),
        ("  cost", total_text(comparison.a)),
        *[(f"  {label}", text) for label, text in budget_rows(comparison.a)],
        ("pass rate B", _pass_rate(comparison.b)),
        ("  interval", str(comparison.b.pass_rate_interval or "-")),
        ("  cost", total_text(comparison.b)),
        *[(f"  {label}", text) for label, text in budget_rows(comparison.b)],
        *_paired(comparison),
        *comparison_rows(comparison.cost),
    ]
    rows += [(name, str(len(pairs))) for name, pairs in _pair_lists(comparison)[2:]]
    for side, summary in (("A", comparison.a), ("B", comparison.b)):
        if summary.damaged_lines:
            rows.append((f"damaged lines in {side}", f"{summary.damaged_lines} (skipped)"))
    for name, value in rows:
        table.add_row(name, Text(value))  # Text: ids and paths are not rich markup
    console.print(table)
    for name, pairs in _pair_lists(comparison):
        if pairs:
            console.print(Text(f"{name}: {shown(pairs)}"), soft_wrap=True)
