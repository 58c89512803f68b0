"""`asynceval report RESULTS.jsonl`: what a run did, as a table or JSON.

A resumed run's cost is what its events file beside the results says every segment was billed
(`asynceval.analysis.cost.with_bill`), and a budgeted run's budget line is against the run's
total over its segments."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import _event_output
from ..analysis import Summary, summarize
from ..analysis.cost import (
    Billed,
    bill_json,
    bill_rows,
    budget_rows,
    cost_rows,
    read_billed,
    with_bill,
)
from ..analysis.run_info import describe, read_manifest
from ..engine.results import read_summaries
from ..engine.statistics import REDUCER_NAMES, as_reducer
from ..errors import ConfigError
from ..events import NO_LLM_CALLS_ADVICE
from ._errors import CLIError
from ._files import check_results


def add_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report", help="summarize a results file", description="Summarize a results.jsonl file."
    )
    report.add_argument("results", help="a results.jsonl file (or the run directory holding it)")
    report.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_reducer(report)
    add_fail_under(report)
    report.set_defaults(handler=report_command)


def add_fail_under(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-under",
        type=rate,
        metavar="RATE",
        help="exit with status 1 when the pass rate is below RATE (0.8 or 80%%), or when no "
        "repetition was scored; errors and timeouts are not scored (default: no floor)",
    )


def add_reducer(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reducer",
        action="append",
        type=reducer_name,
        metavar="NAME",
        help="reduce each task's repetitions with NAME and report its mean over tasks with a 95%% "
        f"interval: {REDUCER_NAMES}; repeatable (default: the reducers the run was started "
        "with, else mean)",
    )


def reducer_name(text: str) -> str:
    """A reducer's name from the command line, checked ("pass_at_k(5)")."""
    try:
        return as_reducer(text).name
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rate(text: str) -> float:
    """A pass rate from the command line: a fraction (0.8) or a percentage (80%)."""
    value = text.strip()
    percent = value.endswith("%")
    try:
        number = float(value[:-1] if percent else value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate (0.8 or 80%)") from None
    if percent:
        number /= 100
    elif 1 < number <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is above 1: for a percentage write {text}%")
    if not 0 <= number <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1 (0% and 100%)")
    return number


# Left out of the summary's pass rate (no evaluator ran) but failures for the gate: the agent, or
# the simulated user it talked to, failed the task (a status the benchmark chose). Other errors
# and timeouts stay out, and the verdict says how many there were.
_FAILED_FOR_THE_GATE = ("agent_error", "user_error")
_UNSCORED_ERRORS = ("unknown_execution_error", "setup_failed", "environment_error")


def fail_under_status(summary: Summary, threshold: float | None, *, quiet: bool = False) -> int:
    """The exit status `--fail-under` asks for: 1 (and why, on stderr) when the pass rate is below
    `threshold` or nothing was scored, else 0 (said on stdout unless `quiet`). The rate is the
    summary's, with agent and user errors counted as failures."""
    if threshold is None:
        return 0
    failed = sum(summary.statuses.get(status, 0) for status in _FAILED_FOR_THE_GATE)
    counted = summary.scored + failed
    errors = sum(summary.statuses.get(status, 0) for status in _UNSCORED_ERRORS)
    stopped = summary.budget_exhausted
    others = summary.repetitions - counted - errors - summary.timeouts - stopped
    unscored = f"not scored: {errors} errors, {summary.timeouts} timeouts" + (
        f", {others} without an evaluator's result" if others else ""
    )
    if stopped:
        unscored += f", {stopped} stopped by the cost budget (run again by --resume)"
    wanted = f"--fail-under {threshold * 100:g}%"
    if not counted:
        print(f"asynceval: {wanted}: no repetition was scored ({unscored})", file=sys.stderr)
        return 1
    rate = summary.passed / counted
    rate_text = f"pass rate {summary.passed:g}/{counted} = {rate:.1%}"
    if summary.pass_rate_for_gate is not None:  # adaptive repeats: the mean over tasks
        rate = summary.pass_rate_for_gate
        rate_text = f"pass rate {rate:.1%} (mean over tasks)"
    if failed:
        rate_text += f" ({failed} agent or user errors counted as failures)"
    # Rounded: 4/5 is not "below 80%" because of float noise.
    if round(rate, 9) < round(threshold, 9):
        print(f"asynceval: {rate_text} is below {wanted} ({unscored})", file=sys.stderr)
        return 1
    if not quiet:
        print(f"{rate_text} meets {wanted} ({unscored})")
    return 0


def error_lines(summary: Summary) -> list[str]:
    """One line per kind of error: its count, what it was, and the first message."""
    return [f"{group['count']} {group['label']}: {group['first']}" for group in summary.error_kinds]


def error_status(summary: Summary, *, allow_errors: bool, stream: TextIO) -> int:
    """The exit status of `asynceval run` for its errors: 1 when any repetition (the latest
    report of each (task, repeat)) ended in an error, with one line per kind on `stream`;
    0 when none did, or with `allow_errors` (`--allow-errors`: a run that expects some)."""
    if not summary.errors or allow_errors:
        return 0
    print(
        f"asynceval: {summary.errors} of {summary.repetitions} repetitions ended in an error "
        "(--allow-errors exits 0 all the same):",
        file=stream,
    )
    for line in error_lines(summary):
        print(f"  {line}", file=stream)
    return 1


def results_file(path_text: str) -> Path:
    path = Path(path_text)
    if path.is_dir():
        path = path / "results.jsonl"
    if not path.is_file():
        raise CLIError(f"{path_text}: no results file there")
    return path


def load_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    """(records, damaged lines) of a results file, without the bulk that summaries and
    comparisons never read (`read_summaries`: a file of large traces costs one line's worth of
    memory); a file that cannot be read or holds nothing is a CLIError naming it."""
    try:
        records, damaged = read_summaries(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"{path}: cannot be read ({exc})") from exc
    if not records:
        raise CLIError(f"{path}: holds no results")
    check_results(path, records)  # an events file, or JSON of another kind: one line
    return records, damaged


@dataclass(frozen=True)
class Loaded:
    """A results file's summary (`summary`: a resumed run's cost figures from its bill), the
    rows the bill adds to its table (`bill_rows`) and the keys it adds to its JSON
    (`bill_json`)."""

    summary: Summary
    bill_rows: list[tuple[str, str]]
    bill_json: dict[str, Any]


def load_summary(
    path: Path, wall_s: float | None = None, reducers: list[str] | None = None
) -> Loaded:
    """The summary of the results file at `path`, with what its events file beside it (every
    segment's `released` events) says was billed and how the run's budget stands."""
    records, damaged = load_records(path)
    reports = summarize(records, wall_s=wall_s, reducers=reducers)
    reports.damaged_lines = damaged  # e.g. a line cut short by a kill
    billed = read_billed(Path(_event_output.events_path_for(path)))
    summary = with_bill(reports, records, billed)
    return Loaded(
        _with_outside(summary, billed, summary is reports),
        bill_rows(reports, billed),
        bill_json(reports, billed),
    )


def _with_outside(summary: Summary, billed: Billed | None, reports_cost: bool) -> Summary:
    """`summary` with the calls no repetition counted (from threads without a repetition's
    context: `calls_outside_repetitions`) in its LLM calls, and in its cost when that is the
    reports' sum (`reports_cost`; a bill's total has them already)."""
    if billed is None or not billed.outside_calls:
        return summary
    cost = summary.cost_usd
    if reports_cost and billed.outside_cost is not None:
        cost = (cost or 0.0) + float(billed.outside_cost)
    return replace(summary, llm_calls=summary.llm_calls + billed.outside_calls, cost_usd=cost)


def report_command(args: argparse.Namespace) -> int:
    path = results_file(args.results)
    loaded = load_summary(path, reducers=args.reducer)
    summary = loaded.summary
    manifest = read_manifest(path)
    if args.json:
        print(json.dumps({**summary.as_dict(), **loaded.bill_json, "run": manifest}, indent=2))
    else:
        if manifest is not None:
            print_manifest(manifest, sys.stdout)
        print_summary(summary, sys.stdout, loaded.bill_rows)
    # With --json, stdout stays one JSON document: the verdict of a pass goes unsaid.
    return fail_under_status(summary, args.fail_under, quiet=args.json)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


ADD_TASKS = "mostly between tasks: add tasks, not repeats"


def pass_rate_text(summary: Summary) -> str:
    """'132/160 = 82.5% (95% CI 70.6%-94.4%)'; under adaptive repeats, where the rate is the mean
    over tasks and not passed/scored, '78.1% (95% CI 61.7%-86.0%)'."""
    assert summary.pass_rate is not None and summary.pass_rate_ci95 is not None
    low, high = summary.pass_rate_ci95
    rate = f"{summary.pass_rate:.1%}"
    if summary.pass_rate_over != "tasks":
        rate = f"{summary.passed:g}/{summary.scored} = {rate}"
    return f"{rate} (95% CI {low:.1%}-{high:.1%})"


def tasks_text(summary: Summary) -> str:
    """How the interval was made: 'clustered by task: 40 tasks, 4 scored each'."""
    fewest, most = summary.scored_per_task
    each = str(most) if fewest == most else f"{fewest}-{most}"
    how = summary.pass_rate_interval or "Wilson, over repetitions"
    return f"{how}: {summary.tasks} tasks, {each} scored each"


def reducer_text(reducer: dict[str, Any]) -> str:
    """'75.0% (95% CI 61.2%-88.8%)', or why there is no value, or that it is the pass rate."""
    if reducer.get("is_pass_rate"):
        return "the pass rate above"
    if reducer["value"] is None:
        return "no task has enough repetitions for it"
    low, high = reducer["ci95"]
    text = f"{reducer['value']:.1%} (95% CI {low:.1%}-{high:.1%}"
    if reducer["too_few"]:
        text += f"; {reducer['too_few']} tasks with too few repetitions left out"
    return text + ")"


def print_manifest(manifest: dict[str, Any], stream: TextIO) -> None:
    """How the run was started, from its run.json."""
    table = Table(title="asynceval run", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for label, text in describe(manifest):
        table.add_row(label, text)
    Console(file=stream).print(table)


def print_summary(summary: Summary, stream: TextIO, bill: Sequence[tuple[str, str]] = ()) -> None:
    """The summary table (plain text when the stream is not a terminal); `bill`: the rows
    the run's bill adds after its cost (`Loaded.bill_rows`)."""
    console = Console(file=stream)
    table = Table(title="asynceval results", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("repetitions", str(summary.repetitions))
    for status, count in summary.statuses.items():
        table.add_row(f"  {status}", str(count))
    if summary.termination_reasons:
        reasons = ", ".join(f"{k} {v}" for k, v in summary.termination_reasons.items())
        table.add_row("termination reasons", reasons)
    if summary.pass_rate is not None and summary.pass_rate_ci95 is not None:
        table.add_row("pass rate", pass_rate_text(summary))
        table.add_row("  interval", tasks_text(summary))
        if summary.add_tasks_not_repeats:
            table.add_row("", ADD_TASKS)
        # The mean reducer alone is the pass rate again: no second row for the same figure.
        if not all(reducer.get("is_pass_rate") for reducer in summary.reducers):
            table.add_row("reducers, over tasks", "")
            for reducer in summary.reducers:
                table.add_row(f"  {reducer['name']}", reducer_text(reducer))
    else:
        table.add_row("pass rate", "no scored repetitions")
    if summary.errors:
        table.add_row("errors", f"{summary.errors} ({summary.timeouts} of them timeouts)")
        for group in summary.error_kinds:
            table.add_row(f"  {group['label']}", f"{group['count']}: {group['first']}")
    else:
        table.add_row("errors", "none")
    for label, text in budget_rows(summary):
        table.add_row(label, text)
    table.add_row("LLM calls / retries", f"{summary.llm_calls} / {summary.retries}")
    if summary.cache_hits:
        table.add_row("answered from the cache", f"{summary.cache_hits} of the LLM calls")
    if summary.journal_hits:
        table.add_row("replayed from the journal", f"{summary.journal_hits} of the LLM calls")
    if summary.hedges:
        table.add_row("hedged (LLM_HEDGE)", f"{summary.hedges} extra requests")
    tokens = f"{summary.prompt_tokens} / {summary.completion_tokens}"
    if summary.cached_tokens:
        tokens += f" ({summary.cached_tokens} in from the provider's prompt cache)"
    table.add_row("tokens in / out", tokens)
    for label, text in [*cost_rows(summary), *bill]:
        table.add_row(Text(label), Text(text))  # Text: model names and task ids are no markup
    table.add_row(
        "task duration p50 / p95",
        f"{_seconds(summary.duration_p50_s)} / {_seconds(summary.duration_p95_s)}",
    )
    table.add_row("wall time", _seconds(summary.wall_s))
    if summary.damaged_lines:
        table.add_row("damaged lines", f"{summary.damaged_lines} (skipped)")
    console.print(table)
    if summary.statuses.get("success") and not summary.llm_calls:
        console.print(f"warning: {NO_LLM_CALLS_ADVICE}", soft_wrap=True)
