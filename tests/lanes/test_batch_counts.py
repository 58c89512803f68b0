"""What the batch lane's events and `logs check` say of lines that were not answered: a line
its batch left undone is a retry of cause `expired` (before: `None: 10`), and a stopped run's
cancelled batch counts its lines `cancelled` (see tests/funnel/test_batch_lane.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynceval import Settings, configure_logging
from asynceval.cli import main
from asynceval.sim import SimConfig, SimProvider

from ..funnel.test_batch_lane import Turns, lane_settings, openai_model, run


async def test_logs_check_counts_expired_batch_lines_as_expired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events_path = tmp_path / "events.jsonl"
    configure_logging(Settings(log_file=str(events_path), log_level="DEBUG"))
    sim = SimProvider(SimConfig(batch_expire_rate=0.3, seed=3))
    try:
        await run(Turns(openai_model(sim)), lane_settings(retry_max_attempts=10), 20)
    finally:
        configure_logging(Settings(), stream=None)  # closes the events file
    expired = sim.stats()["batches"]["openai"]["expired"]
    assert expired > 0
    assert main(["logs", "check", str(events_path)]) == 0
    out = capsys.readouterr().out
    (line,) = [row for row in out.splitlines() if row.startswith("retries")]
    assert f"expired: {expired}" in line and "None" not in line, line
