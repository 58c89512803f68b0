"""Calls of the batch lane: named by their batches' `batch_submitted` events (no slot events
of their own), each with the batch that carried it."""

from __future__ import annotations

from pathlib import Path

from asynceval.analysis import frames

from .conftest import json_lines


def test_each_line_of_a_batch_is_a_call_of_the_batch_lane(batch_run: Path) -> None:
    submitted = [
        e for e in json_lines(batch_run / "events.jsonl") if e["event"] == "batch_submitted"
    ]
    batch_of = {call_id: e["batch_id"] for e in submitted for call_id in e["call_ids"]}
    assert len(batch_of) == sum(e["requests"] for e in submitted) == 40
    calls = frames.calls(batch_run).to_pylist()
    lines = [c for c in calls if c["batches"]]
    assert {c["call_id"]: c["batch_id"] for c in lines} == batch_of
    for call in lines:
        assert (call["lane"], call["outcome"], call["attempts"]) == ("batch", "answered", 0)
        assert call["ended_at"] > call["started_at"]  # submitted, then its batch completed
    creations = [c for c in calls if not c["batches"]]  # each batch's creation held a slot
    assert len(creations) == len(submitted) and {c["agent"] for c in creations} == {"batch"}
    (run,) = frames.runs(batch_run).to_pylist()
    assert run["lane"] == "batch" and run["repetitions"] == 40
