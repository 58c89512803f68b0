"""`asynceval estimate TARGET`: what a run will cost and take, from a small sample run for real.

The benchmark and its tasks are built exactly as `asynceval run` builds them (the same options,
settings and target loading: `_run_options`, `_target`, `_run_tasks`, `_run_cost`). A random
sample of the run's (task, repeat) pairs, each equally likely and spread evenly over the tasks
(`_estimate_sample`; 20 by default, all of them when the run has fewer), then runs for real,
through the run's own runner (`_run._execute`), under the run's budget if it has one, as the
first segment of the run itself: a run directory (`--out DIR`, `--keep DIR` being its older
name; default results/NAME-RUN_ID) with its manifest (run.json, as `asynceval run` writes it,
the segment marked as the estimate's sample), results, events and call journal. `asynceval run
--resume DIR` then runs the rest of the run there: the sampled pairs are already in its results
under their own task ids and repeat numbers, so nothing of the sample is paid for twice, and the
budget the sample spent from is the directory's. The sample neither reads nor fills the
model-call cache (an answer from the cache costs nothing, which would flatter the estimate); the
run that resumes the directory uses the cache as the user sets it. The sample's calls are real
calls on the configured provider, billed as such: a line on stderr says how many repetitions
will run before any does, and the estimate says what they cost.

From the sample's reports and events (`_estimate_report`, shown by `_estimate_show`) come the
whole run's projected LLM calls, prompt and completion tokens, cost (USD) and wall time at the
configured limits, the provider's announced rate budget and the lane, each with a 95% interval.
A sample the budget cut short is projected from the repetitions that finished (and exits 3).
`--repeats auto` is refused: how many repetitions an adaptive run makes depends on its outcomes,
which a sample cannot tell.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import anyio

from .. import events
from ..analysis.cost import money
from ..config import Settings
from ..engine import Benchmark, Task
from ..engine.run_paths import new_run_id
from ..errors import TaskSpecError
from ..limits import CostBudget
from ..runtime import Runtime
from . import _manifest
from ._errors import CLIError
from ._estimate_report import Estimate, project_sample
from ._estimate_sample import Sample, draw
from ._estimate_show import as_json, print_table
from ._files import config_error, write_error
from ._progress import Mode, Progress
from ._run import OVERRIDES, _events_file, _execute, _RunOptions, build_benchmark
from ._run_cost import BUDGET_EXHAUSTED, check_prices, parse_max_cost
from ._run_dir import (
    check_journal,
    lock_dir,
    new_manifest,
    output_dir,
    say_taken_over,
    write_manifest,
)
from ._run_options import (
    adaptive_rule,
    add_provider_options,
    add_task_options,
    parse_repeats,
)
from ._target import source_files

DEFAULT_SAMPLE = 20


def add_parser(commands: Any) -> None:
    estimate = commands.add_parser(
        "estimate",
        help="estimate a run's cost, tokens, calls and wall time from a sample",
        description="Run a random sample of a run's repetitions for real (they are billed) and "
        "project the whole run's LLM calls, tokens, cost (USD) and wall time at the configured "
        "limits, the provider's announced rate budget and the lane, each with a 95% interval. "
        "Takes the options of `asynceval run` that decide what the run computes and how it "
        "calls the provider. The sample is a run directory (--out DIR, default "
        "results/NAME-RUN_ID) without the model-call cache: `asynceval run --resume DIR` runs "
        "the rest of the run there and pays for none of the sample again.",
    )
    estimate.add_argument("target", help="path/file.py[:NAME] or module:NAME, as for run")
    add_task_options(estimate)
    add_provider_options(estimate)
    estimate.add_argument(
        "--max-cost",
        metavar="USD",
        help="the run's budget: the sample spends at most USD on LLM calls (each call reserves "
        "its worst case first; a sample the budget cuts short is projected from the "
        "repetitions that finished, exit 3), the projected cost is compared with it, and "
        "`asynceval run --resume DIR` goes on with what the sample left of it (default: "
        "MAX_COST_USD, else no budget)",
    )
    estimate.add_argument(
        "--sample",
        metavar="N",
        default=str(DEFAULT_SAMPLE),
        help=f"repetitions to run, N >= 2 (default: {DEFAULT_SAMPLE}; all of them when the run "
        "has fewer; a whole number of repeats per task when N is at least the number of tasks)",
    )
    estimate.add_argument(
        "--seed",
        metavar="S",
        help="the seed of the sample's draw, a whole number (default: a random one, shown)",
    )
    estimate.add_argument(
        "--out",
        "--keep",
        dest="out",
        metavar="DIR",
        help="the run directory the sample is written to, a new or empty folder; `asynceval run "
        "--resume DIR` runs the rest of the run there (default: results/NAME-RUN_ID; --keep is "
        "the older name of this option)",
    )
    estimate.add_argument("--json", action="store_true", help="print the estimate as JSON")
    estimate.set_defaults(handler=estimate_command)
    setattr(estimate, "error", _one_line_error)  # noqa: B010 - argparse's hook, per parser


def _one_line_error(message: str) -> NoReturn:
    """argparse's refusal of an option (a bad number, a missing TARGET) as one line, exit 2,
    instead of the usage text and the error."""
    print(f"asynceval estimate: {message} (see asynceval estimate --help)", file=sys.stderr)
    raise SystemExit(2)


def _check_options(args: argparse.Namespace) -> tuple[int, int]:
    """(sample size, seed) of valid options; the options an estimate cannot take, one line."""
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
    _check_out(args.out)
    return size, seed


def estimate_command(args: argparse.Namespace) -> int:
    size, seed = _check_options(args)
    bench, tasks = _prepare(args)
    _check_prices(bench)
    try:
        sample = draw(tasks, bench.n_task_repeats, size, random.Random(seed))
    except TaskSpecError as exc:  # a bad row of --tasks, met while drawing
        raise CLIError(str(exc)) from None
    if not sample.tasks:
        raise CLIError(f"{args.target}: the run has no task; nothing to estimate")
    run_id = new_run_id()
    assert bench.runtime is not None
    settings = bench.runtime.settings
    run_args = _run_args(args, settings)
    hashes = _manifest.file_hashes(source_files(args.target))
    out = output_dir(run_args, run_id)
    with contextlib.ExitStack() as holding:
        lock = lock_dir(holding, out)
        manifest = new_manifest(run_args, out, run_id, bench, tasks, settings, hashes)
        check_journal(out, run_args, None)
        _manifest.add_segment(
            manifest, run_id=run_id, args=run_args, resumed=False, target_sha256=hashes
        )
        manifest["segments"][-1]["estimate"] = {"sample": sample.size, "seed": seed}
        write_manifest(out, manifest)
        if lock is not None and lock.taken_over is not None:
            say_taken_over(out, lock.taken_over)
        _say_what_runs(sample, bench)
        bench.n_task_repeats = sample.repeats_each
        status = _run_sample(bench, sample.tasks, out, run_id)
    if status:
        return status
    try:
        estimate = project_sample(out, sample, seed)
    except CLIError as exc:
        if bench.budget is not None and bench.budget.exhausted:  # cut before any finished
            raise CLIError(f"{_budget_line(bench.budget)}; no estimate", BUDGET_EXHAUSTED) from None
        raise exc from None
    _warn(estimate)
    if args.json:
        print(json.dumps(as_json(estimate), indent=2))
    else:
        print_table(estimate, sys.stdout)
    if estimate.sample >= estimate.repetitions:
        print(f"asynceval estimate: the sample is the whole run, in {out}", file=sys.stderr)
    else:
        print(
            f"asynceval estimate: the sample is the run directory {out}; run the rest of the "
            f"run, without paying for the sample again, with: {_resume_command(out)}",
            file=sys.stderr,
        )
    return _budget_status(bench, estimate)


def _run_args(args: argparse.Namespace, settings: Settings) -> argparse.Namespace:
    """`args` as `asynceval run` would have them, for the run directory's manifest: the options
    the estimate does not take at their run defaults (the real run's cache is the user's), the
    budget in force (--max-cost or MAX_COST_USD: the run directory's total)."""
    run_args = argparse.Namespace(**vars(args))
    run_args.resume = None
    if run_args.max_cost is None:
        run_args.max_cost = settings.max_cost_usd
    for dest in (*_manifest.COMPUTES.values(), *_manifest.HOW.values()):
        if not hasattr(run_args, dest):
            setattr(run_args, dest, None)
    for flag in ("no_cache", "no_journal", "allow_errors", "keep_batches"):
        setattr(run_args, flag, bool(getattr(run_args, flag)))
    return run_args


def _resume_command(out: Path) -> str:
    return f"asynceval run --resume {shlex.quote(str(out))}"


def _budget_status(bench: Benchmark, estimate: Estimate) -> int:
    """A budget (--max-cost, MAX_COST_USD) the sample used up: one line, exit 3; the estimate
    above is then from the repetitions that finished before it ran out."""
    budget = bench.budget
    if budget is None or not budget.exhausted:
        return 0
    print(
        f"asynceval estimate: {_budget_line(budget)}; the estimate is from the "
        f"{estimate.sample} of the {estimate.sample_planned} sampled repetitions that finished",
        file=sys.stderr,
    )
    return BUDGET_EXHAUSTED


def _budget_line(budget: CostBudget) -> str:
    return (
        f"the budget ran out during the sample: spent {money(float(budget.spent))} of "
        f"{money(float(budget.limit))} (--max-cost, MAX_COST_USD; each call reserves its worst "
        "case first)"
    )


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


def _check_out(text: str | None) -> None:
    """--out DIR: a new or empty folder (a run directory that holds a run is resumed, not
    sampled into), else one line."""
    if text is None:
        return
    path = Path(text).expanduser()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        hint = ""
        if (path / _manifest.NAME).is_file():
            hint = f" ({text} holds a run: finish it with: {_resume_command(path)})"
        raise CLIError(f"--out {text}: give a new or empty folder{hint}")


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
    each = "" if sample.repeats_each == 1 else f" ({sample.repeats_each} of each task)"
    print(
        f"asynceval estimate: running {sample.size} of the run's {sample.population:,} "
        f"repetitions{each} for real {where}",
        file=sys.stderr,
    )
    sys.stderr.flush()


def _run_sample(bench: Benchmark, tasks: list[Task], out: Path, run_id: str) -> int:
    """Run the sampled tasks (`bench.n_task_repeats` times each) into the run directory `out`
    with `asynceval run`'s runner; 0 when the sample ran to its end (or the budget cut it),
    130 (or the signal's status) when it was stopped. The tasks go to the engine as a stream,
    so that the results file's header names no task set of its own: the run that resumes the
    directory has the whole one (run.json holds its record)."""
    assert bench.runtime is not None
    events_file = _events_file(out, bench.runtime.settings)
    mode: Mode = "live" if sys.stderr.isatty() else "quiet"
    total = len(tasks) * bench.n_task_repeats
    progress = Progress(bench.controller or bench.runtime.limiter, total, mode, sys.stderr)
    options = _RunOptions(resume=False, run_id=run_id, journal=True)
    kept = f"the repetitions that finished are in {out}; {_resume_command(out)} runs the rest"
    try:
        stopped = anyio.run(_execute, bench, iter(tasks), out, options, progress, events_file, None)
    except KeyboardInterrupt:
        print(f"asynceval estimate: interrupted; no estimate ({kept})", file=sys.stderr)
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
        print(f"asynceval estimate: stopped; no estimate ({kept})", file=sys.stderr)
        return 128 + stopped
    return 0
