"""The `asynceval` command line (layer 9 of DESIGN section 1, the top: it may import every
layer, and nothing but `asynceval.__main__` imports it).

    asynceval run TARGET [--tasks FILE] [--out DIR | --resume DIR] [...]
    asynceval estimate TARGET [run options] [--sample N] [--seed S] [--json]
    asynceval report RESULTS.jsonl [--json] [--fail-under RATE]
    asynceval compare RUN_A RUN_B [--json]
    asynceval view RUN_DIR [RUN_DIR ...] [--out FILE.html] [--open]
    asynceval logs check EVENTS.jsonl [--limit N] [--json]
    asynceval export RUN_DIR [RUN_DIR ...] --parquet OUT_DIR
    asynceval sql RUN_DIR [RUN_DIR ...] "SELECT ..." [--format table|csv|json]
    asynceval cache stats [DIR] [--json]
    asynceval cache prune [DIR] [--max-bytes N] [--older-than DAYS] [--all]
    asynceval sim serve [--port 8000] [--latency 0.05] [--fault 503=0.1] ...

A mistake a person makes (a missing target, a bad file, a bad setting) gets one line on stderr and
a non-zero exit status, never a traceback. Output cut short by its reader (`asynceval logs check
... | head`) ends quietly with exit status 141, as a command killed by SIGPIPE has in a shell
(128 + 13): not 1, which `logs check` uses for "the limit was not held", and not 0, so that a
pipeline under `set -o pipefail` sees that the output was not all read.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from ..config import UnknownSettingWarning
from ._cache import add_parser as add_cache_parser
from ._compare import add_parser as add_compare_parser
from ._errors import CLIError, handle_warnings, one_line
from ._estimate import add_parser as add_estimate_parser
from ._export import add_parser as add_export_parser
from ._logs import add_parser as add_logs_parser
from ._report import add_parser as add_report_parser
from ._run import add_parser as add_run_parser
from ._sim import add_parser as add_sim_parser
from ._sql import add_parser as add_sql_parser
from ._view import add_parser as add_view_parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asynceval", description="Run LLM and agent evaluations under bounded concurrency."
    )
    parser.add_argument("--version", action="version", version=f"asynceval {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_parser(commands)
    add_estimate_parser(commands)
    add_report_parser(commands)
    add_compare_parser(commands)
    add_view_parser(commands)
    add_logs_parser(commands)
    add_export_parser(commands)
    add_sql_parser(commands)
    add_cache_parser(commands)
    add_sim_parser(commands)
    return parser


def _one_line_warnings() -> None:
    """Our warnings (a mistyped setting name) as one line each, like the errors."""

    def setting_warning(message: Warning | str, category: type[Warning]) -> bool:
        if issubclass(category, UnknownSettingWarning):
            print(f"asynceval: warning: {message}", file=sys.stderr)
            return True
        return False

    handle_warnings("settings", setting_warning)


BROKEN_PIPE = 141
"""The exit status when stdout's reader went away (128 + SIGPIPE, as a shell reports it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `asynceval` console script; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        _one_line_warnings()
        try:
            status: int = args.handler(args)
        except KeyboardInterrupt:  # before a run took over Ctrl-C (say, while Dask imports)
            print(f"asynceval {args.command}: interrupted", file=sys.stderr)
            return 130
        except CLIError as exc:
            print(f"asynceval {args.command}: {one_line(str(exc))}", file=sys.stderr)
            return exc.exit_code
        sys.stdout.flush()  # a reader gone is found here, not at exit
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    return status


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit finds no broken
    pipe to complain about."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
