from __future__ import annotations

import io
import json
import logging
from datetime import datetime
from pathlib import Path

import structlog
from pydantic import SecretStr

from asynceval import Settings, configure_logging, events
from asynceval.events import bind_context, register_secret

from .conftest import EventLog


def test_events_are_json_lines_with_level_and_utc_timestamp(event_log: EventLog) -> None:
    events.queueing(agent="judge-1", dimension="accuracy", call_id="c1", queue_depth=1)
    events.retry(
        agent="judge-1",
        dimension="d",
        call_id="c1",
        attempt=1,
        status_code=429,
        delay_s=1.2,
        error="HTTP 429",
    )
    first, second = event_log.all()
    assert first["event"] == "queueing" and first["level"] == "INFO"
    assert first["queue_depth"] == 1 and first["agent"] == "judge-1"
    assert second["level"] == "WARNING" and second["status_code"] == 429
    stamp = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00"))
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0


def test_bound_context_reaches_every_event_and_unbinds(event_log: EventLog) -> None:
    with bind_context(task_id="t-7", repeat_idx=2):
        events.timeout(agent="a", dimension="d", call_id="c", timeout_s=0.3)
    events.timeout(agent="a", dimension="d", call_id="c", timeout_s=0.3)
    inside, outside = event_log.all()
    assert inside["task_id"] == "t-7" and inside["repeat_idx"] == 2
    assert "task_id" not in outside


def test_secrets_never_reach_a_line_in_either_format() -> None:
    register_secret(SecretStr("my-registered-secret-value"))
    for fmt in ("json", "console"):
        stream = io.StringIO()
        configure_logging(
            Settings(log_format=fmt, llm_api_key="sk-settings-key-abcdef"), stream=stream
        )
        events.emit(
            "probe",
            api_key="plain-key-value",
            headers={"Authorization": "Bearer abcdefghijkl", "accept": "json"},
            error="failed with sk-settings-key-abcdef and my-registered-secret-value",
            token_text="Bearer zyxwvutsrqpo",
            secret_obj=SecretStr("hidden-in-secretstr"),
            nested=[{"x-api-key": "another-key-value"}],
            prompt_tokens=12,
        )
        out = stream.getvalue()
        for leaked in (
            "plain-key-value",
            "abcdefghijkl",
            "sk-settings-key-abcdef",
            "my-registered-secret-value",
            "zyxwvutsrqpo",
            "hidden-in-secretstr",
            "another-key-value",
        ):
            assert leaked not in out, (fmt, leaked, out)
        assert "12" in out and "json" in out


def test_configure_logging_leaves_application_logging_alone() -> None:
    before_structlog = structlog.get_config()
    before_handlers = list(logging.getLogger().handlers)
    configure_logging(Settings(), stream=io.StringIO())
    assert structlog.get_config() == before_structlog
    assert logging.getLogger().handlers == before_handlers


def test_log_file_appends_and_level_filters(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "earlier"}\n')
    configure_logging(Settings(log_file=str(path), log_level="WARNING"))
    events.acquired(agent="a", dimension="d", call_id="c", active_slots=1, wait_s=0.0)
    events.timeout(agent="a", dimension="d", call_id="c", timeout_s=1.0)
    configure_logging(Settings(), stream=io.StringIO())  # closes the file it opened
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["earlier", "timeout"]


async def test_configure_logging_without_settings_takes_the_current_runtimes(
    tmp_path: Path,
) -> None:
    """Event output sits below the runtime and never imports it: the runtime installs where the
    settings in force come from, so `configure_logging()` inside `async with Runtime(...)` takes
    that runtime's LOG_FILE and LOG_LEVEL, not the environment's defaults."""
    from asynceval import Runtime

    log_file = tmp_path / "events.jsonl"
    async with Runtime(Settings(log_level="WARNING", log_file=str(log_file))):
        configure_logging()
        events.emit("an_info", level="info")
        events.emit("a_warning", level="warning")
        events.flush()
    names = [json.loads(line)["event"] for line in log_file.read_text().splitlines()]
    assert names == ["a_warning"]
