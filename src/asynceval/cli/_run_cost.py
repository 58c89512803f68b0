"""`asynceval run`'s cost: the `--max-cost` option, the warning about a model with no price,
and the one line (exit status 3) of a run whose budget ran out: the same line whether the budget
ran out in this segment or an earlier one (a resume without a larger `--max-cost` then starts
nothing). The budget is the whole run's: its spent figure counts every segment's spending."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import TextIO

from ..engine import Benchmark
from ..errors import ConfigError
from ..runtime import Runtime
from ..runtime.prices import SIM_MODEL
from ._errors import CLIError

BUDGET_EXHAUSTED = 3
"""The exit status of a run stopped by its budget (`--max-cost`)."""


def add_cost_options(run: argparse.ArgumentParser, *, resumable: bool = False) -> None:
    """--max-cost USD (`resumable`: the help of `asynceval run`, which says how a resume
    carries the budget on)."""
    resume = (
        "; the budget is the run directory's: a resume goes on with what is left of it, and "
        "--resume DIR --max-cost USD makes USD the run's new total (what earlier segments spent "
        "counts against it)"
        if resumable
        else ""
    )
    run.add_argument(
        "--max-cost",
        metavar="USD",
        help="spend at most USD on LLM calls: each call reserves its worst case first (its "
        "prompt at its body's bytes, or at its model's context window when the provider adds "
        "context: previous_response_id, files or images by id or URL, built-in tools), a call "
        f"that would go over is not sent, the run stops and exits 3{resume} (default: "
        "MAX_COST_USD, else no budget)",
    )


def parse_max_cost(args: argparse.Namespace) -> None:
    """--max-cost as a number > 0 (one line for a bad one)."""
    text = args.max_cost
    if text is None:
        return
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # NaN fails it too
        raise CLIError(f"--max-cost must be an amount in USD > 0, got {text.strip() or repr(text)}")
    args.max_cost = value


def check_prices(runtime: Runtime, stream: TextIO | None = None) -> None:
    """The run's model (LLM_MODEL, or the simulator's), priced or not: one warning when it has
    no price (its calls are counted apart as unpriced, never as $0); with a budget, a CLIError,
    since nothing bounds what its calls cost. A model the settings do not name is checked at its
    first call. `stream`: where the warning goes (default: stderr as it is then). A budget that
    is no amount (MAX_COST_USD=inf) is refused here too, before the run directory is made."""
    settings = runtime.settings
    if settings.max_cost_usd is not None and not math.isfinite(settings.max_cost_usd):
        raise CLIError(f"MAX_COST_USD must be an amount in USD > 0, got {settings.max_cost_usd}")
    model = settings.llm_model or (SIM_MODEL if settings.llm_base_url is None else None)
    if model is None:
        return
    try:
        price = runtime.prices.price(model, base_url=settings.llm_base_url)
    except ConfigError as exc:
        raise CLIError(str(exc)) from None
    if price is not None:
        return
    if settings.max_cost_usd is not None:
        raise CLIError(
            f"the model {model!r} has no price, so --max-cost (MAX_COST_USD) cannot bound what "
            "its calls cost: give its price in LLM_PRICES_FILE (a JSON or YAML file such as "
            '{"MODEL": {"input_mtok": 2.5, "output_mtok": 10}}), or run without a budget'
        )
    print(
        f"asynceval run: warning: the model {model!r} has no price (genai-prices does not know "
        "it): its calls are counted as unpriced, not as $0; give its price in LLM_PRICES_FILE",
        file=stream or sys.stderr,
    )


def budget_status(bench: Benchmark, out: Path, left: int | None, stream: TextIO) -> int:
    """0, or for a run its budget stopped, `BUDGET_EXHAUSTED` after one line on `stream` saying
    what was spent and what is left to run (`left`: repetitions without a success; None when
    not known). A run whose answers took its spending over the budget says by how much first."""
    budget = bench.budget
    if budget is None:
        return 0
    if budget.spent > budget.limit:  # answers beyond their requests' bounds (the cost guide)
        print(
            f"asynceval: budget exceeded by ${float(budget.spent - budget.limit):.6g}: answers "
            "reported more prompt tokens than their requests' bounds (see 'What bounds the "
            "prompt' in the cost guide)",
            file=stream,
        )
    if not budget.exhausted:
        return 0
    rest = f"{left} repetitions left to run" if left is not None else "repetitions left to run"
    print(
        f"asynceval: budget exhausted: spent ${float(budget.spent):.6g} of "
        f"${float(budget.limit):.6g}; {rest}; finish with: asynceval run --resume "
        f"{shlex.quote(str(out))} --max-cost USD",
        file=stream,
    )
    return BUDGET_EXHAUSTED
