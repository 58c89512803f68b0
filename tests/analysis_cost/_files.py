"""Results files written by hand in the shape a run writes them (header, then one report per
repetition), with the cost keys of DESIGN section 15 in each report's usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODEL = "asynceval-sim"


def header(**extra: Any) -> dict[str, Any]:
    """A run's header line, as `asynceval run` writes it (the parts the summaries read)."""
    return {
        "type": "header",
        "run_id": "r1",
        "asynceval_version": "0.1.0",
        "started_at_unix": 1000.0,
        "benchmark": "Arithmetic",
        "benchmark_config": {"name": "Arithmetic", "n_task_repeats": 1, "reducers": []},
        "max_concurrent_llm_calls": 5,
        "max_concurrent_tasks": 16,
        "resumed": False,
        **extra,
    }


def usage(
    cost: float | None,
    *,
    calls: int = 1,
    unpriced: int = 0,
    cached: int = 0,
    by_model: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A report's usage with cost: `calls` priced calls of MODEL costing `cost` in all, unless
    `by_model` says otherwise."""
    models = by_model if by_model is not None else {MODEL: {"calls": calls, "cost_usd": cost}}
    return {
        "llm_calls": calls + unpriced,
        "failed_calls": 0,
        "retries": 0,
        "prompt_tokens": 11 * (calls + unpriced),
        "completion_tokens": calls + unpriced,
        "cached_tokens": cached,
        "cache_hits": 0,
        "journal_hits": 0,
        "hedges": 0,
        "cost_usd": cost,
        "unpriced_calls": unpriced,
        "by_model": models,
    }


def report(
    task_id: str,
    repeat_idx: int = 0,
    *,
    passed: bool | None = True,
    status: str = "success",
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One repetition's report, as a run writes it (`usage`: see `usage`)."""
    record: dict[str, Any] = {
        "run_id": "r1",
        "task_id": task_id,
        "repeat_idx": repeat_idx,
        "status": status,
        "termination_reason": "agent_stop" if status == "success" else None,
        "eval": [] if passed is None else [{"passed": passed, "answer": "5"}],
        "error": None,
        "traces": {"metadata": {"total_components": 0}},
        "config": {"benchmark": {"name": "Arithmetic"}},
        "usage": usage if usage is not None else {"llm_calls": 1, "prompt_tokens": 11},
        "timing": {"queued_s": 0.0, "duration_s": 0.1, "finished_at": 1001.0},
        "attempts": 1,
    }
    return {**record, **extra}


def stopped(task_id: str, repeat_idx: int = 0, cost: float | None = None) -> dict[str, Any]:
    """A repetition the cost budget stopped (status budget_exhausted), having spent `cost`."""
    error = {"type": "BudgetExhausted", "kind": "budget_exhausted", "message": "budget spent"}
    return report(
        task_id,
        repeat_idx,
        passed=None,
        status="budget_exhausted",
        usage=usage(cost, calls=1 if cost is not None else 0),
        error=error,
        termination_reason=None,
    )


def write_results(directory: Path, records: list[dict[str, Any]]) -> Path:
    """A run directory holding `records` as its results.jsonl."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "results.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return directory
