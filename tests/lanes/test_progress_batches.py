"""The progress display says what a run has spent so far and, in the batch lane, its batches:
how many are open and in which state, the lines waiting in them, how many are done."""

from __future__ import annotations

import io

from asynceval.cli._progress import Progress
from asynceval.limits import ConcurrencyController


def _progress() -> Progress:
    return Progress(ConcurrencyController(5), 10, "plain", io.StringIO(), already_done=0)


def test_batches_and_cost_are_shown_as_they_go() -> None:
    progress = _progress()
    assert progress.batches() is None and "batches" not in progress.line()
    assert "cost" not in progress.line()  # nothing priced yet: no $0
    progress.observe("batch_submitted", {"batch_id": "b1", "requests": 3})
    progress.observe("batch_submitted", {"batch_id": "b2", "requests": 2})
    progress.observe("batch_progress", {"batch_id": "b1", "status": "in_progress"})
    assert progress.batches() == "2 open (in_progress 1, submitted 1), 5 lines waiting, 0 done"
    progress.observe(
        "batch_completed",
        {"batch_id": "b1", "succeeded": 2, "errored": 1, "expired": 0, "cost_usd": 0.25},
    )
    progress.observe("released", {"call_id": "c", "cost_usd": 0.5})
    progress.observe("released", {"call_id": "d", "cost_usd": None, "unpriced": True})
    assert progress.batches() == "1 open (submitted 1), 2 lines waiting, 1 done"
    line = progress.line()
    assert "| batches 1 open (submitted 1), 2 lines waiting, 1 done |" in line
    assert "| cost $0.75 |" in line
    rows = {row for row in progress.table().columns[0].cells}
    assert {"batches", "cost so far"} <= {str(row) for row in rows}


def test_a_batch_a_resume_took_over_is_open_again() -> None:
    progress = _progress()
    progress.observe("batch_reattached", {"batch_id": "b1", "requests": 4, "found": "journal"})
    progress.observe("batch_reattached", {"batch_id": None, "requests": 2, "found": "not_found"})
    assert progress.batches() == "1 open (resumed 1), 4 lines waiting, 0 done"
