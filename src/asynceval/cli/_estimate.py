"""`asynceval estimate TARGET`: what a run will cost and take, from a small sample run for real.

The benchmark and its tasks are built exactly as `asynceval run` builds them (the same options,
settings and target loading: `_run_options`, `_target`, `_run_tasks`, `_run_cost`). A random
sample of the run's (task, repeat) pairs, each equally likely and spread evenly over the tasks
(`_estimate_sample`; 20 by default, all of them when the run has fewer), then runs for real,
through the run's own runner (`_run._execute`), under the run's budget if it has one, in a
temporary run directory, deleted afterwards unless `--keep DIR`: the user's results/ folder is
never touched, and the sample neither reads nor fills the model-call cache (an answer from the
cache costs nothing, which would flatter the estimate, and the sample's answers would flatter
the next run). The sample's calls are real calls on the configured provider, billed as such:
a line on stderr says how many repetitions will run before any does.

From the sample's reports and events (`_estimate_report`) come the whole run's projected LLM
calls, prompt and completion tokens, cost (USD) and wall time at the configured limits and lane,
each with a 95% interval. `--repeats auto` is refused: how many repetitions an adaptive run makes
depends on its outcomes, which a sample cannot tell.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import anyio

from .. import events
from ..analysis.cost import money
from ..engine import Benchmark, Task
from ..engine.run_paths import new_run_id
from ..errors import TaskSpecError
from ..runtime import Runtime
from ._errors import CLIError
from ._estimate_report import Estimate, as_json, print_table, project_sample
from ._estimate_sample import Sample, draw
from ._files import config_error, write_error
from ._progress import Mode, Progress
from ._run import OVERRIDES, _events_file, _execute, _RunOptions, build_benchmark
from ._run_cost import BUDGET_EXHAUSTED, add_cost_options, check_prices, parse_max_cost
from ._run_options import (
    adaptive_rule,
    add_provider_options,
    add_task_options,
    parse_repeats,
)

DEFAULT_SAMPLE = 20


def add_parser(commands: Any) -> None:
    estimate = commands.add_parser(
        "estimate",
        help="estimate a run's cost, tokens, calls and wall time from a sample",
        description="Run a random sample of a run's repetitions for real (they are billed) and "
        "project the whole run's LLM calls, tokens, cost (USD) and wall time at the configured "
        "limits and lane, each with a 95%% interval. Takes the options of `asynceval run` that "
        "decide what the run computes and how it calls the provider. The sample runs in a "
        "temporary directory (never results/) without the model-call cache.",
    )
    estimate.add_argument("target", help="path/file.py[:NAME] or module:NAME, as for run")
    add_task_options(estimate)
    add_provider_options(estimate)
    add_cost_options(estimate)
    estimate.add_argument(
        "--sample",
        metavar="N",
        default=str(DEFAULT_SAMPLE),
        help=f"repetitions to run, N >= 2 (default: {DEFAULT_SAMPLE}; all of them when the run "
        "has fewer)",
    )
    estimate.add_argument(
        "--seed",
        metavar="S",
        help="the seed of the sample's draw, a whole number (default: a random one, shown)",
    )
    estimate.add_argument(
        "--keep",
        metavar="DIR",
        help="write the sample run to DIR, a new or empty folder, and keep it (default: a "
        "temporary folder, deleted afterwards)",
    )
    estimate.add_argument("--json", action="store_true", help="print the estimate as JSON")
    estimate.set_defaults(handler=estimate_command)
    setattr(estimate, "error", _one_line_error)  # noqa: B010 - argparse's hook, per parser


def _one_line_error(message: str) -> NoReturn:
    """argparse's refusal of an option (a bad number, a missing TARGET) as one line, exit 2,
    instead of the usage text and the error."""
    print(f"asynceval estimate: {message} (see asynceval estimate --help)", file=sys.stderr)
    raise SystemExit(2)


def estimate_command(args: argparse.Namespace) -> int:
    size, seed = _sample_options(args)
    parse_repeats(args)
    parse_max_cost(args)
    if args.repeats == "auto":
        raise CLIError(
            "--repeats auto cannot be estimated: how many repetitions it runs depends on their "
            "outcomes; give --repeats N"
        )
    adaptive_rule(args)  # --ci-width or --max-repeats without auto: one line
    if args.dask is not None:
        raise CLIError(
            "--dask: the sample runs in this process; leave --dask out (calls, tokens and cost "
            "do not depend on where repetitions run)"
        )
    keep = _keep_dir(args.keep)
    bench, tasks = _prepare(args)
    _check_prices(bench)
    repeats = bench.n_task_repeats
    try:
        sample = draw(tasks, repeats, size, random.Random(seed))
    except TaskSpecError as exc:  # a bad row of --tasks, met while drawing
        raise CLIError(str(exc)) from None
    if not sample.tasks:
        raise CLIError(f"{args.target}: the run has no task; nothing to estimate")
    _say_what_runs(sample, bench)
    bench.n_task_repeats = 1  # a task drawn k times is k copies (see _estimate_sample)
    with _sample_dir(keep) as out:
        status = _run_sample(bench, sample.tasks, out)
        if status:
            return status
        _check_budget(bench)
        estimate = project_sample(out, sample, seed)
    _warn(estimate)
    if args.json:
        print(json.dumps(as_json(estimate), indent=2))
    else:
        print_table(estimate, sys.stdout)
    if keep is not None:
        print(f"sample run: {keep}", file=sys.stderr)
    return 0


def _warn(estimate: Estimate) -> None:
    """What makes the estimate less sure, one line each: repetitions of the sample that failed,
    a projected cost above the run's budget, a sample that was itself rate-limited."""
    failed = sum(n for status, n in estimate.sample_statuses.items() if status != "success")
    if failed:
        print(
            f"asynceval estimate: warning: {failed} of the sample's {estimate.sample} repetitions "
            "did not succeed; the estimate counts them as the run would",
            file=sys.stderr,
        )
    cost, budget = estimate.cost.priced, estimate.budget_usd
    if budget is not None and cost is not None and cost.high > budget:
        print(
            f"asynceval estimate: warning: the run's cost may exceed its budget "
            f"({money(cost.low)} - {money(cost.high)} against {money(budget)}): it would stop "
            "early (exit 3)",
            file=sys.stderr,
        )
    if estimate.sample_paced:
        print(
            "asynceval estimate: warning: the sample itself waited for the rate limits; the "
            "wall time may be overestimated",
            file=sys.stderr,
        )


def _check_prices(bench: Benchmark) -> None:
    """`asynceval run`'s check of the model's price: a warning when it has none, one line with
    a budget (nothing would bound what its calls cost)."""
    assert bench.runtime is not None
    said = io.StringIO()
    check_prices(bench.runtime, said)
    if said.getvalue():
        print(
            said.getvalue().replace("asynceval run:", "asynceval estimate:"),
            end="",
            file=sys.stderr,
        )


def _check_budget(bench: Benchmark) -> None:
    """A budget (--max-cost, MAX_COST_USD) the sample itself used up: one line, exit 3 (the
    sample is cut short, and the run would be stopped sooner still)."""
    budget = bench.budget
    if budget is not None and budget.exhausted:
        raise CLIError(
            f"the budget ran out during the sample: spent {money(float(budget.spent))} of "
            f"{money(float(budget.limit))} (--max-cost, MAX_COST_USD; each call reserves its "
            "worst case first); no estimate",
            exit_code=BUDGET_EXHAUSTED,
        )


def _sample_options(args: argparse.Namespace) -> tuple[int, int]:
    """--sample N (>= 2) and --seed S (a random one when not given), one line when wrong."""
    try:
        size = int(args.sample)
    except ValueError:
        raise CLIError(f"--sample must be a whole number >= 2, got {args.sample}") from None
    if size < 2:
        raise CLIError(f"--sample must be >= 2 (an interval needs two), got {size}")
    if args.seed is None:
        return size, random.SystemRandom().randrange(2**31)
    try:
        return size, int(args.seed)
    except ValueError:
        raise CLIError(f"--seed must be a whole number, got {args.seed}") from None


def _keep_dir(text: str | None) -> Path | None:
    """--keep DIR: a new or empty folder (made now), else one line."""
    if text is None:
        return None
    path = Path(text).expanduser()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise CLIError(f"--keep {text}: give a new or empty folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--keep {text}: cannot be made ({exc.strerror or exc})") from None
    return path


def _prepare(args: argparse.Namespace) -> tuple[Benchmark, Iterable[Task | Any]]:
    """The benchmark and tasks `asynceval run` would build from these options (in its order:
    settings first, installed as the process default before the target is imported), without
    the model-call cache."""
    options = {
        setting: getattr(args, option)
        for option, setting in OVERRIDES.items()
        if getattr(args, option, None) is not None
    }
    options["llm_cache_dir"] = None
    bench, tasks = build_benchmark(args, options)
    assert bench.runtime is not None
    if bench.runtime.cache is not None:  # the target brought its own runtime, with a cache
        bench.runtime = Runtime(
            bench.runtime.settings.model_copy(update={"llm_cache_dir": None}),
            limiter=bench.runtime.limiter,
            rate=bench.runtime.rate,
        )
    return bench, tasks


def _say_what_runs(sample: Sample, bench: Benchmark) -> None:
    """The one line before any call: how many repetitions run for real, and where."""
    assert bench.runtime is not None
    settings = bench.runtime.settings
    model = f", model {settings.llm_model}" if settings.llm_model else ""
    where = (
        f"on {settings.llm_base_url}{model} (billed)"
        if settings.llm_base_url
        else f"on the embedded simulated provider{model}"
    )
    print(
        f"asynceval estimate: running {len(sample.tasks)} of the run's {sample.population:,} "
        f"repetitions for real {where}",
        file=sys.stderr,
    )
    sys.stderr.flush()


@contextlib.contextmanager
def _sample_dir(keep: Path | None) -> Iterator[Path]:
    """Where the sample run is written: `keep`, or a temporary folder removed afterwards."""
    if keep is not None:
        yield keep
        return
    folder = Path(tempfile.mkdtemp(prefix="asynceval-estimate-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_sample(bench: Benchmark, tasks: list[Task], out: Path) -> int:
    """Run the sampled tasks once each into `out` with `asynceval run`'s runner; 0 when the
    sample ran to its end, 130 (or the signal's status) when it was stopped."""
    assert bench.runtime is not None
    events_file = _events_file(out, bench.runtime.settings)
    mode: Mode = "live" if sys.stderr.isatty() else "quiet"
    progress = Progress(bench.controller or bench.runtime.limiter, len(tasks), mode, sys.stderr)
    options = _RunOptions(resume=False, run_id=new_run_id(), journal=True)
    try:
        stopped = anyio.run(_execute, bench, tasks, out, options, progress, events_file, None)
    except KeyboardInterrupt:
        print("asynceval estimate: interrupted; no estimate", file=sys.stderr)
        return 130
    except Exception as exc:  # the sample's files, a task's row, the target's settings
        if error := write_error(exc, {str(out / "results.jsonl"), str(out / "events.jsonl")}):
            raise CLIError(f"the sample run could not be written in {out}: {error}") from None
        if (refused := config_error(exc)) is not None:
            raise CLIError(str(refused)) from None
        raise
    finally:
        events.flush()
    if events_file.error is not None:
        raise CLIError(f"the sample run's events could not be written: {events_file.error}")
    if stopped:  # SIGTERM or SIGHUP
        print("asynceval estimate: stopped; no estimate", file=sys.stderr)
        return 128 + stopped
    return 0
