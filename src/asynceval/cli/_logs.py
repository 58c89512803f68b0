"""`asynceval logs check EVENTS.jsonl`: did the limit hold, was every 429 resolved, did a
budgeted run spend no more than its budget?

Each run in the file (a resumed run appends its own) is checked against its own limit; the
budget is the run directory's, so a run and its resumes get one budget verdict: what all of
them spent against the total of the last. Calls
answered from the model-call cache or the call journal held no slot: a run answered wholly from
them holds its limit. Exit status 0 when all hold, 1 when one was violated or nothing can be
checked (no call events, or calls whose limit no run header gives and no --limit), 2 when the log
cannot be read. When a run's SDK clients sent around the funnel (`funnel_bypassed`), the check
says that its verdict covers only the calls that went through the funnel: the others left no
event (the exit status is the verdict on those it covers).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..analysis.logcheck import LogCheck, LogFormatError, check_events, read_events
from ._errors import CLIError


def add_parser(commands: Any) -> None:
    logs = commands.add_parser("logs", help="inspect event logs")
    sub = logs.add_subparsers(dest="logs_command", required=True, metavar="SUBCOMMAND")
    check = sub.add_parser(
        "check",
        help="replay an event log: max in flight, unresolved 429s, retries, waits",
        description="Exit 0 if the limit held and every 429 was resolved, 1 if not, 2 if the "
        "log cannot be read.",
    )
    check.add_argument("events", help="an events.jsonl file (or the run directory holding it)")
    check.add_argument(
        "--limit", type=int, default=None, help="the limit to check (default: run_started's)"
    )
    check.add_argument("--json", action="store_true", help="print the findings as JSON")
    check.set_defaults(handler=logs_check)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms"


def _no_slot(check: LogCheck) -> str:
    """Where the calls that held no slot were answered, e.g. "3 from the cache, 40 in batches"."""
    parts = [
        (check.cache_hits, "from the cache"),
        (check.journal_hits, "from the journal"),
        (check.batch_calls, "in provider batches"),
    ]
    return ", ".join(f"{count} {where}" for count, where in parts if count)


def _print_limit(check: LogCheck) -> None:
    stored = check.answered_without_slot
    answered = f", {stored} more holding no slot ({_no_slot(check)})" if stored else ""
    print(f"events            {check.events} ({check.calls} calls{answered})")
    if check.batches or check.batches_reattached:
        taken = f", {check.batches_reattached} taken over from an earlier run" * bool(
            check.batches_reattached
        )
        print(f"batches           {check.batches} created{taken}")
    reason = check.cannot_check
    if reason is not None:
        print(f"max in flight     cannot check: {reason}")
        return
    limit = "unknown (pass --limit)" if check.limit is None else str(check.limit)
    verdict = "held" if check.limit_held else "EXCEEDED"
    print(f"max in flight     {check.max_in_flight} (limit {limit}: {verdict})")
    if check.funnel_only:
        print(
            f"funnel bypassed   {check.bypassed_clients} SDK client(s) sent around the funnel: "
            "this verdict covers only the calls that went through the funnel"
        )
    if check.limit_changes:
        print(
            f"adaptive limits   {check.limit_changes} changes, lowest "
            f"{check.lowest_endpoint_limit} (never above the cap: {verdict.lower()})"
        )
    _print_spend(check)
    if len(check.runs) > 1:
        for number, run in enumerate(check.runs, start=1):
            held = "held" if run["limit_held"] else "EXCEEDED"
            print(
                f"  run {number:<13} {run['max_in_flight']} of limit {run['limit']}: {held} "
                f"({run['calls']} calls)"
            )


def _print_spend(check: LogCheck) -> None:
    """What the runs spent, and one budget verdict per run directory in the log (a run and its
    resumes, whose spending counts against one total)."""
    if check.cost_usd is not None:
        print(f"cost              ${check.cost_usd:.6g} (the released events' cost_usd)")
    directories: list[list[dict[str, Any]]] = []
    for run in check.runs:
        if run.get("resumed") and directories:
            directories[-1].append(run)
        else:
            directories.append([run])
    for segments in directories:
        budgeted = [run for run in segments if run.get("budget_usd") is not None]
        if not budgeted:
            continue
        last = budgeted[-1]
        over = [n for n, run in enumerate(segments, start=1) if not run["budget_held"]]
        verdict = "held" if not over else "EXCEEDED"
        if over and len(segments) > 1:
            first = segments[over[0] - 1]
            verdict += (
                f" (by segment {over[0]}: ${first['spent_usd']:.6g} of ${first['budget_usd']:.6g})"
            )
        count = len(segments)
        which = f" over {count} segments" if count > 1 else ""
        spent = segments[-1].get("spent_usd") or 0.0
        if over and count == 1:  # answers beyond their requests' bounds: by how much
            verdict += f" by ${spent - last['budget_usd']:.6g}"
        print(f"budget            ${spent:.6g} of ${last['budget_usd']:.6g}{which}: {verdict}")


def logs_check(args: argparse.Namespace) -> int:
    path = Path(args.events)
    if path.is_dir():
        path = path / "events.jsonl"
    if args.limit is not None and args.limit < 1:
        raise CLIError(f"--limit must be >= 1, got {args.limit}")
    try:
        events = read_events(path)
    except FileNotFoundError:
        raise CLIError(f"{args.events}: no such file") from None
    except (LogFormatError, OSError, UnicodeDecodeError) as exc:
        raise CLIError(str(exc)) from exc
    check = check_events(events, limit=args.limit)
    if args.json:
        print(json.dumps(check.as_dict(), indent=2))
    else:
        _print_limit(check)
        print(f"unresolved 429s   {len(check.unresolved_429)}")
        by_status = ", ".join(f"{k}: {v}" for k, v in sorted(check.retries_by_status.items()))
        print(f"retries           {check.retries}" + (f" ({by_status})" if by_status else ""))
        print(f"timeouts          {check.timeouts}")
        if check.sdk_retry_calls:
            print(
                f"sdk retries       {check.sdk_retry_calls} calls were an SDK's own retries, "
                "each retried by the funnel too (give the SDK max_retries=0)"
            )
        print(f"failed calls      {check.failed_calls}")
        print(
            f"queue wait        p50 {_ms(check.queue_wait_p50_s)}, p95 {_ms(check.queue_wait_p95_s)}"
        )
        print(f"slot held         p50 {_ms(check.held_p50_s)}, p95 {_ms(check.held_p95_s)}")
        verdict = "OK" if check.ok else "VIOLATED" if check.checkable else "CANNOT CHECK"
        print(f"{verdict} (funnel calls only)" if check.funnel_only else verdict)
    return 0 if check.ok else 1
