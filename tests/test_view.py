"""`asynceval view`: the numbers the page is given (events reduced to time buckets, the table,
the details and their caps, several runs), the page's escaping, and the command's errors. The
page itself, rendered by a real browser, is tested in test_view_browser.py."""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import asynceval.analysis
from asynceval.analysis import check_events, summarize
from asynceval.analysis._view_events import read_events_view
from asynceval.analysis._view_rows import MIN_ROW_CAP, fit_text, read_rows
from asynceval.analysis.logcheck import combine, read_events
from asynceval.analysis.view import SCRIPTS, build_view, script_json, view_data
from asynceval.cli._errors import CLIError
from asynceval.cli._view import add_parser
from asynceval.engine import read_records
from asynceval.events import NO_LLM_CALLS_ADVICE

VIEW_ASSETS = Path(asynceval.analysis.__file__).parent / "_view"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def ev(name: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return {"event": name, "level": "info", "timestamp": at(seconds), **fields}


def write_jsonl(path: Path, lines: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(x if isinstance(x, str) else json.dumps(x) + "\n" for x in lines))


HEADER = {"type": "header", "benchmark": "B", "max_concurrent_llm_calls": 2, "started_at_unix": 1}


def report(task: str, repeat: int = 0, passed: bool | None = True, **extra: Any) -> dict[str, Any]:
    record = {
        "task_id": task,
        "repeat_idx": repeat,
        "status": "success",
        "termination_reason": "agent_stop",
        "eval": None if passed is None else [{"passed": passed}],
        "error": None,
        "traces": {"agents": {}},
        "config": {},
        "usage": {"llm_calls": 1, "retries": 0, "prompt_tokens": 5, "completion_tokens": 1},
        "timing": {"queued_s": 0.0, "duration_s": 0.5, "finished_at": 2.0},
        "attempts": 1,
    }
    return {**record, **extra}


# Offsets in seconds from T0; 10 buckets of 0.1 s over [0, 1.0]; events sit mid-bucket.
HAND_MADE = [
    ev("run_started", 0.0, max_concurrent_llm_calls=2),
    ev("queueing", 0.05, call_id="a", queue_depth=1),
    ev("acquired", 0.05, call_id="a", active_slots=1, wait_s=0.0),
    ev("acquired", 0.15, call_id="b", active_slots=2, wait_s=0.01),
    ev("retry", 0.25, call_id="b", attempt=1, status_code=429, delay_s=0.1, error="429"),
    ev("released", 0.35, call_id="a", active_slots=1, held_s=0.3),
    ev("acquired", 0.45, call_id="c", active_slots=2, wait_s=0.3),
    ev("limit_changed", 0.45, endpoint="e", limit=1, previous=2, cap=2, in_flight=2, reason="429"),
    ev("retry", 0.55, call_id="c", attempt=1, status_code=503, delay_s=0.1, error="503"),
    ev("released", 0.65, call_id="b", active_slots=1, held_s=0.5),
    ev("timeout", 0.75, call_id="c", timeout_s=1.0),
    ev("released", 0.85, call_id="c", active_slots=0, held_s=0.4),
    ev("run_finished", 1.0, counts={"success": 1}, duration_s=1.0),
]


def run_dir(tmp_path: Path, name: str, records: list[Any], events: list[Any] | None) -> Path:
    path = tmp_path / name
    write_jsonl(path / "results.jsonl", records)
    if events is not None:
        write_jsonl(path / "events.jsonl", events)
    return path


def test_events_are_reduced_to_buckets_by_hand(tmp_path: Path) -> None:
    damaged = ["not json\n", "[1, 2]\n"]
    path = run_dir(tmp_path, "r", [HEADER, report("t")], HAND_MADE[:3] + damaged + HAND_MADE[3:])
    data, _ = view_data([path], max_buckets=10)
    events = data["runs"][0]["events"]
    assert events["present"] and events["damaged_lines"] == 2 and events["check"]["events"] == 13
    (run,) = events["runs"]
    assert run["buckets"] == 10 and run["bucket_s"] == pytest.approx(0.1)
    assert run["limit"] == 2  # from run_started
    # What is in flight when a bucket begins counts towards its max.
    assert run["max_in_flight"] == [1, 2, 2, 2, 2, 2, 2, 1, 1, 0]
    assert run["mean_in_flight"][0] == pytest.approx(0.5, abs=0.01)  # 1 call for half of it
    assert run["mean_in_flight"][2] == pytest.approx(2.0, abs=0.01)
    assert run["retries"] == [0, 0, 1, 0, 0, 1, 0, 0, 0, 0]
    assert run["timeouts"] == [0, 0, 0, 0, 0, 0, 0, 1, 0, 0]
    assert run["adaptive_limit"] == [None] * 4 + [1] * 6  # from the first limit_changed on
    assert run["acquired"] == [1, 1, 0, 0, 1, 0, 0, 0, 0, 0]
    assert run["wait_p50"][4] == 0.3 and run["wait_p50"][2] is None
    assert run["queued_max"][0] == 1
    stats = run["stats"]
    assert stats["calls"] == 3 and stats["max_in_flight"] == 2 and stats["limit_held"]
    assert stats["retries_by_status"] == {"429": 1, "503": 1} and stats["timeouts"] == 1
    assert stats["lowest_endpoint_limit"] == 1 and stats["limit_changes"] == 1
    assert stats["wait_max_s"] == 0.3 and stats["still_in_flight"] == 0
    assert events["wait_histogram"]["counts"][0] == 1  # the 0 s wait; 10 ms and 300 ms apart
    # The same log as `asynceval logs check` reads it.
    check = check_events([e for e in HAND_MADE])
    assert (check.max_in_flight, check.retries, check.timeouts) == (2, 2, 1)


def test_each_run_in_the_log_gets_its_own_chart_and_limit(tmp_path: Path) -> None:
    resumed = [
        ev("run_started", 100.0),  # no limit of its own: the second header's
        ev("acquired", 100.5, call_id="x", wait_s=0.0),
        # a killed run's call "a" from the first run is not carried over
        ev("released", 101.0, call_id="x", held_s=0.5),
    ]
    killed = HAND_MADE[:4]  # the first run ends with "a" and "b" in flight
    header2 = {**HEADER, "max_concurrent_llm_calls": 7}
    path = run_dir(tmp_path, "r", [HEADER, report("t"), header2], killed + resumed)
    data, _ = view_data([path], max_buckets=50)
    first, second = data["runs"][0]["events"]["runs"]
    assert first["stats"]["still_in_flight"] == 2 and first["limit"] == 2
    # No limit in its run_started: unknown, as logs check says; the header's beside it.
    assert second["limit"] is None and second["header_limit"] == 7
    assert second["stats"]["max_in_flight"] == 1
    assert second["stats"]["calls"] == 1 and second["buckets"] <= 50


def test_a_cluster_runs_events_are_replayed_in_time_order(tmp_path: Path) -> None:
    """Workers' lines reach the file in arrival order: b's acquired is written before the
    released of a that made room for it, though it happened after."""
    log = [
        ev("run_started", 0.0, max_concurrent_llm_calls=1),
        ev("acquired", 0.1, call_id="a", wait_s=0.0, worker="w1"),
        ev("acquired", 0.3, call_id="b", wait_s=0.1, worker="w2"),
        ev("released", 0.2, call_id="a", held_s=0.1, worker="w1"),
        ev("released", 0.4, call_id="b", held_s=0.1, worker="w2"),
    ]
    path = run_dir(tmp_path, "r", [HEADER, report("t")], log)
    data, _ = view_data([path], max_buckets=4)
    (run,) = data["runs"][0]["events"]["runs"]
    assert run["stats"]["max_in_flight"] == 1 == check_events(log).max_in_flight
    assert run["stats"]["limit_held"]


def test_a_large_log_is_never_embedded_raw(tmp_path: Path) -> None:
    log = [ev("run_started", 0.0, max_concurrent_llm_calls=50)]
    for n in range(3000):
        log.append(ev("acquired", n * 0.01, call_id=f"c{n}", wait_s=0.001))
        log.append(ev("released", n * 0.01 + 0.005, call_id=f"c{n}", held_s=0.005))
    path = run_dir(tmp_path, "r", [HEADER, report("t")], log)
    page = build_view([path], max_buckets=100)
    (run,) = view_data([path], max_buckets=100)[0]["runs"][0]["events"]["runs"]
    assert run["buckets"] == 100 and len(run["max_in_flight"]) == 100
    assert sum(run["acquired"]) == 3000 and run["stats"]["max_in_flight"] == 1
    assert "c2999" not in page and len(page) < (path / "events.jsonl").stat().st_size


def test_no_events_file_means_no_chart(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "r", [HEADER, report("t")], None)
    events = view_data([path])[0]["runs"][0]["events"]
    assert events == {**events, "present": False, "runs": [], "check": None}


def test_the_table_holds_the_latest_report_of_each_pair(tmp_path: Path) -> None:
    error = {"type": "AgentError", "message": "it broke\nbadly", "traceback": "..."}
    records = [
        HEADER,
        report("a", passed=False),
        report("b", status="agent_error", eval=None, error=error, termination_reason=None),
        "{cut short\n",
        {**HEADER, "resumed": True},
        report("a", passed=True),  # the resumed run's re-run replaces the first
        report("c", passed=None),
    ]
    path = run_dir(tmp_path, "r", records, None)
    data, details = view_data([path])
    run = data["runs"][0]
    columns = run["columns"]
    assert columns["task_id"] == ["a", "b", "c"] and run["n_rows"] == 3
    assert columns["score"] == [1.0, None, None] and columns["line"] == [6, 3, 7]
    assert columns["status"] == ["success", "agent_error", "success"]
    assert columns["error"][1] == "your agent raised: AgentError: it broke badly"
    assert columns["prompt_tokens"] == [5, 5, 5] and columns["duration_s"] == [0.5] * 3
    assert run["superseded"] == 1 and run["summary"]["damaged_lines"] == 1
    assert len(run["headers"]) == 2 and run["summary"]["runs"] == 2
    assert run["summary"]["pass_rate"] == 1.0 and run["summary"]["scored"] == 1
    second = json.loads(details[0][1])
    assert second["error"] == error and second["line"] == 3 and "truncated" not in second
    assert "timing" not in second and "usage" not in second  # the table has them


def test_a_config_is_kept_once_per_run(tmp_path: Path) -> None:
    config = {"metadata": {"timestamp": "t"}, "benchmark": {"name": "B"}}
    records = [HEADER, report("a", config=config), report("b", config={**config, "x": 1})]
    records.append(report("c", config={**config, "metadata": {"timestamp": "later"}}))
    path = run_dir(tmp_path, "r", records, None)
    data, details = view_data([path])
    assert data["runs"][0]["configs"] == [
        {"benchmark": {"name": "B"}},
        {"benchmark": {"name": "B"}, "x": 1},
    ]
    assert [json.loads(line)["config"] for line in details[0]] == [0, 1, 0]


def test_long_traces_are_cut_keeping_their_ends_and_saying_where_the_rest_is(
    tmp_path: Path,
) -> None:
    messages = [{"role": "user", "content": f"message {n} " + "x" * 400} for n in range(500)]
    traces = {"agents": {"solver": {"messages": messages}}}
    path = run_dir(tmp_path, "r", [HEADER, report("long", traces=traces)], None)
    rows = read_rows(path / "results.jsonl", row_cap=20_000)
    detail = json.loads(rows.details[0])
    assert len(rows.details[0]) < 20_000 + 200 and rows.truncated_rows == 1
    assert detail["truncated"] == ["traces"] and detail["line"] == 2 and detail["cap"] == 20_000
    kept = detail["traces"]["agents"]["solver"]["messages"]
    assert kept[0]["content"].startswith("message 0 ")
    assert kept[-1]["content"].startswith("message 499 ")  # the end of the conversation
    assert any(isinstance(m, str) and "more items" in m for m in kept)
    assert fit_text({"a": 1}, 100) == ('{"a":1}', False)


def test_many_rows_share_a_budget_failures_first(tmp_path: Path) -> None:
    big = {"s": "y" * 9000}
    records = [HEADER] + [report(f"t{n}", traces=big, passed=n % 10 != 0) for n in range(100)]
    path = run_dir(tmp_path, "r", records, None)
    rows = read_rows(path / "results.jsonl", budget=100 * 2000)
    sizes = [len(d) for d in rows.details]
    assert sum(sizes) <= 100 * 2000 + 100 * 50
    # The rows that failed get eight times the share: here, their whole traces.
    assert all("truncated" not in json.loads(rows.details[n]) for n in range(0, 100, 10))
    assert rows.truncated_rows == 90 and max(sizes[1:10]) < 2000 < min(sizes[0::10])
    starved = read_rows(path / "results.jsonl", budget=0)  # never below the floor
    assert all(MIN_ROW_CAP // 2 < len(d) < MIN_ROW_CAP + 200 for d in starved.details)
    small = read_rows(path / "results.jsonl", row_cap=1000)  # the budget is large enough
    assert all(len(d) <= 1000 + 50 for d in small.details)


def test_nothing_a_run_holds_can_end_the_script_element(tmp_path: Path) -> None:
    evil = "</script><script>document.title='pwned'</script><!--<script>"
    traces = {"messages": [{"role": "assistant", "content": evil}]}
    records = [HEADER, report(evil, traces=traces, error={"type": "E", "message": evil})]
    path = run_dir(tmp_path, "r", records, None)
    page = build_view([path])
    assert evil not in page and "<!--<script>" not in page
    # Every </script> closes one of our own elements: data, one details block, the script.
    assert page.count("</script>") == page.count("<script") == 3
    data = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', page, re.S)
    details = re.search(r'<script type="application/json" id="details-0">(.*?)</script>', page)
    assert data is not None and details is not None
    assert json.loads(data.group(1))["runs"][0]["columns"]["task_id"] == [evil]
    assert json.loads(details.group(1))["traces"]["messages"][0]["content"] == evil
    assert json.loads(script_json({"x": float("nan")})) == {"x": "nan"}


def test_several_runs_are_compared_with_the_first(tmp_path: Path) -> None:
    a = run_dir(tmp_path, "a", [HEADER, report("t1"), report("t2", passed=False)], HAND_MADE)
    b = run_dir(
        tmp_path, "b", [HEADER, report("t1"), report("t2"), report("t3", passed=False)], None
    )
    data, details = view_data([a, b])
    assert [run["label"] for run in data["runs"]] == ["a", "b"] and len(details) == 2
    (paired,) = data["comparisons"]
    assert paired["label_a"] == "a" and paired["label_b"] == "b" and paired["n_pairs"] == 2
    assert paired["improved_count"] == 1 and paired["regressed_count"] == 0
    assert paired["improved"] == [{"task_id": "t2", "repeat_idx": 0}]
    assert paired["only_in_b_count"] == 1 and paired["difference"] == pytest.approx(0.5)
    assert view_data([a])[0]["comparisons"] == []
    twin = run_dir(tmp_path / "other", "a", [HEADER, report("t1")], None)
    twins = view_data([a, twin])[0]["runs"]
    assert twins[0]["label"] != twins[1]["label"]  # one name twice: labelled by path


def view_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="asynceval")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["view", *argv])
    status: int = args.handler(args)
    return status


def test_the_command_writes_the_page_where_it_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a = run_dir(tmp_path, "a", [HEADER, report("t1")], HAND_MADE)
    b = run_dir(tmp_path, "b", [HEADER, report("t1")], None)
    assert view_cli(str(a)) == 0
    assert capsys.readouterr().out == f"{a / 'view.html'}\n"
    assert (a / "view.html").read_text().startswith("<!DOCTYPE html>")
    monkeypatch.chdir(tmp_path)
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda uri: opened.append(uri) or True)
    assert view_cli(str(a), str(b / "results.jsonl"), "--open") == 0
    assert capsys.readouterr().out == "asynceval-view.html\n"
    assert opened == [(tmp_path / "asynceval-view.html").as_uri()]
    assert view_cli(str(b), "--out", "x.html") == 0 and (tmp_path / "x.html").is_file()
    write_jsonl(tmp_path / "app.jsonl", [HEADER, report("t1")])  # the Python API's any name
    assert view_cli("app.jsonl") == 0 and (tmp_path / "app.html").is_file()
    assert "asynceval view: app.jsonl<" in (tmp_path / "app.html").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing"], "missing: no such file or directory"),
        (["empty"], "empty: no results file there"),
        (["a", "--out", "a/results.jsonl/view.html"], "a/results.jsonl/view.html: Not a"),
        (["a", "--out", "a"], "--out a: is a directory"),
    ],
)
def test_a_persons_mistake_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    run_dir(tmp_path, "a", [HEADER, report("t1")], None)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CLIError) as raised:
        view_cli(*args)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


# ---------- the limit's verdict is `asynceval logs check`'s ----------


def _untimed(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "timestamp"}


def _epoch_stamped(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "timestamp": datetime.fromisoformat(event["timestamp"]).timestamp()}


# Resumed twice: the first run had 5 calls in flight against its limit of 2 (killed), the second is
# fine, the last had nothing left to do (3 repetitions already done).
RESUMED_LOG = [
    ev("run_started", 0.0, max_concurrent_llm_calls=2),
    *(ev("acquired", 0.1 + n / 100, call_id=f"k{n}", wait_s=0.0) for n in range(5)),
    ev("run_started", 10.0, max_concurrent_llm_calls=2),
    ev("acquired", 10.1, call_id="x", wait_s=0.01),
    ev("released", 10.2, call_id="x", held_s=0.1),
    ev("run_started", 20.0, max_concurrent_llm_calls=2),
    ev("run_finished", 20.1, counts={}, skipped_as_done=3, duration_s=0.1),
]

LOGS = {
    # Three acquired without a timestamp and one with: 4 in flight against a limit of 1.
    "untimed": [
        ev("run_started", 0.0, max_concurrent_llm_calls=1),
        *(_untimed(ev("acquired", 0.1, call_id=c)) for c in "abc"),
        ev("acquired", 0.2, call_id="d", wait_s=0.5),
        *(ev("released", 0.3 + n / 10, call_id=c, held_s=0.1) for n, c in enumerate("abcd")),
    ],
    "epoch": [_epoch_stamped(e) for e in HAND_MADE],
    "adaptive_above_cap": [
        ev("run_started", 0.0, max_concurrent_llm_calls=2),
        ev("acquired", 0.1, call_id="a", wait_s=0.0),
        ev("limit_changed", 0.2, endpoint="e", limit=3, previous=2, cap=2),
        ev("released", 0.3, call_id="a", held_s=0.2),
    ],
    # A worker on a non-call event makes it a cluster run: replayed in time order.
    "cluster_by_any_event": [
        ev("run_started", 0.0, max_concurrent_llm_calls=1),
        ev("task_started", 0.05, task_id="t", repeat_idx=0, worker="w1"),
        ev("acquired", 0.1, call_id="a", wait_s=0.0),
        ev("acquired", 0.3, call_id="b", wait_s=0.1),
        ev("released", 0.2, call_id="a", held_s=0.1),
        ev("released", 0.4, call_id="b", held_s=0.1),
    ],
    # Waits and holds as logs check counts them: none on record is none, not 0; an unbalanced
    # release's hold counts; an unresolved 429; bools and text where numbers should be.
    "odd_waits": [
        ev("run_started", 0.0, max_concurrent_llm_calls=3),
        ev("acquired", 0.1, call_id="a"),
        ev("acquired", 0.2, call_id="b", wait_s=0.25),
        ev("released", 0.3, call_id="zz", held_s=9.0),
        ev("retry", 0.35, call_id="b", status_code=429, task_id="t", repeat_idx=0),
        ev("released", 0.4, call_id="a", held_s="x"),
        ev("acquired", 0.5, call_id="c", wait_s=True),
    ],
    "resumed": RESUMED_LOG,
    "hand_made": HAND_MADE,
}


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_views_figures_are_logs_checks(tmp_path: Path, name: str) -> None:
    log = LOGS[name]
    path = run_dir(tmp_path, name, [HEADER, report("t")], log)
    events = view_data([path], max_buckets=20)[0]["runs"][0]["events"]
    expected = check_events(read_events(path / "events.jsonl")).as_dict()
    shown = {k: expected[k] for k in events["check"] if k != "unresolved_429"}
    assert events["check"] == {**shown, "unresolved_429": len(expected["unresolved_429"])}
    replays = read_events_view(path / "events.jsonl", [], 20).replays
    assert combine(replays).as_dict() == expected  # every figure, each run's and the whole's
    assert len(events["runs"]) == len(expected["runs"])
    for run, checked in zip(events["runs"], expected["runs"], strict=True):
        stats = run["stats"]
        assert (run["limit"], stats["calls"]) == (checked["limit"], checked["calls"])
        assert stats["max_in_flight"] == checked["max_in_flight"] == max(run["max_in_flight"])
        assert stats["limit_held"] == checked["limit_held"]


def test_events_without_a_usable_timestamp_stay_in_the_replay(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "r", [HEADER, report("t")], LOGS["untimed"])
    events = view_data([path], max_buckets=10)[0]["runs"][0]["events"]
    (run,) = events["runs"]
    assert run["stats"]["max_in_flight"] == 4 and not run["stats"]["limit_held"]
    assert run["stats"]["untimed"] == 3 and not events["check"]["ok"]
    assert sum(run["acquired"]) == 4 and run["max_in_flight"][:4] == [3, 3, 3, 4]
    epoch = run_dir(tmp_path, "e", [HEADER, report("t")], LOGS["epoch"])
    (timed,) = view_data([epoch], max_buckets=10)[0]["runs"][0]["events"]["runs"]
    assert timed["stats"]["calls"] == 3 and timed["max_in_flight"][2] == 2
    assert timed["stats"]["untimed"] == 0 and timed["bucket_s"] == pytest.approx(0.1)


def test_an_adaptive_limit_above_the_cap_is_a_violation(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "r", [HEADER, report("t")], LOGS["adaptive_above_cap"])
    (run,) = view_data([path])[0]["runs"][0]["events"]["runs"]
    assert run["stats"]["max_in_flight"] == 1 and run["limit"] == 2
    assert not run["stats"]["limit_held"] and not run["stats"]["adaptive_held"]


def test_waits_and_holds_are_logs_checks(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "r", [HEADER, report("t")], LOGS["odd_waits"])
    events = view_data([path])[0]["runs"][0]["events"]
    stats = events["runs"][0]["stats"]
    # wait_s missing is no wait (not 0); True is 1.0 as logs check reads it.
    assert (stats["wait_p50_s"], stats["wait_max_s"]) == (0.25, 1.0)
    assert stats["held_p95_s"] == 9.0 and stats["unresolved_429"] == 1
    assert sum(events["wait_histogram"]["counts"]) == 2


def test_runs_in_the_log_find_their_header_by_run_id(tmp_path: Path) -> None:
    headers = [{**HEADER, "run_id": "A", "max_concurrent_llm_calls": 3}]
    headers.append({**HEADER, "run_id": "B", "max_concurrent_llm_calls": 5})
    log = [ev("run_started", 0.0, run_id="B"), ev("acquired", 0.1, call_id="x", run_id="B")]
    log += [ev("run_started", 1.0, run_id="A"), ev("acquired", 1.1, call_id="y", run_id="A")]
    path = run_dir(tmp_path, "r", [headers[0], report("t"), headers[1]], log)
    first, second = view_data([path])[0]["runs"][0]["events"]["runs"]
    assert (first["header"], first["header_limit"]) == (1, 5)  # by position: the first, 3
    assert (second["header"], second["header_limit"]) == (0, 3)
    old = run_dir(tmp_path, "old", [HEADER, report("t")], [_without_run_id(e) for e in log])
    by_place = view_data([old])[0]["runs"][0]["events"]["runs"]
    assert [run["header"] for run in by_place] == [0, None]


def _without_run_id(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "run_id"}


def test_a_cluster_run_is_read_again_in_time_order(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "r", [HEADER, report("t")], LOGS["cluster_by_any_event"])
    (run,) = view_data([path], max_buckets=4)[0]["runs"][0]["events"]["runs"]
    assert run["cluster"] and run["stats"]["max_in_flight"] == 1 and run["stats"]["limit_held"]
    assert sum(run["acquired"]) == 2 and run["stats"]["events"] == 6


# ---------- the results side ----------


def test_the_summary_from_light_records_is_summarizes(tmp_path: Path) -> None:
    """What is kept for summarize and compare_runs is small, and gives the same figures."""
    judge = [{"score": 0.25, "reasoning": "x" * 5000}, {"score": 0.5}, {"score": 7}]
    records = [
        HEADER,
        report("a", passed=False, timing={"duration_s": 1.5, "finished_at": 99.0}),
        report("b", eval=judge, usage={"llm_calls": 3, "cache_hits": 2, "retries": 1.0}),
        report("c", status="evaluation_failed", eval=[{"passed": True}]),
        report("d", status="task_timeout", eval=None, termination_reason=None),
        {**HEADER, "resumed": True, "started_at_unix": 50},
        report("a", passed=True, timing={"duration_s": 0.25, "finished_at": 20.0}),
    ]
    path = run_dir(tmp_path, "r", records, None)
    data, _ = view_data([path])
    full, _ = read_records(path / "results.jsonl")
    assert data["runs"][0]["summary"] == summarize(full).as_dict()
    assert data["runs"][0]["summary"]["wall_s"] == 98.0  # to the replaced report's end
    rows = read_rows(path / "results.jsonl")
    assert len(rows.records) == 2 + 4  # two headers, the last report of each pair
    allowed = {"task_id", "repeat_idx", "status", "termination_reason", "eval", "usage", "timing"}
    reports = [r for r in rows.records if r.get("type") != "header"]
    assert all(set(r) <= allowed and len(json.dumps(r)) < 300 for r in reports)
    assert reports[1]["eval"] == [{"score": 0.375}] and reports[1]["usage"]["cache_hits"] == 2


ODD_LINES = [
    report("calls_text", usage={"llm_calls": "abc", "retries": None, "prompt_tokens": 1e999}),
    report("usage_list", usage=[1]),
    report("timing_text", timing="x"),
    report(["a"]),  # an unhashable task_id
    report("nan_time", timing={"duration_s": float("nan"), "queued_s": float("-inf")}),
    '{"task_id": "deep", "eval": ' + "[" * 995 + "]" * 995 + "}\n",
    '{"task_id": "deep2", "traces": ' + "[" * 600 + "]" * 600 + "}\n",
]


def test_odd_values_in_a_results_file_never_raise(tmp_path: Path) -> None:
    deep_event = '{"event": "acquired", "call_id": ' + "[" * 995 + "]" * 995 + "}\n"
    path = run_dir(tmp_path, "r", [HEADER, *ODD_LINES], [*HAND_MADE[:3], deep_event])
    data, details = view_data([path])
    run = data["runs"][0]
    assert run["columns"]["task_id"][:5] == [
        "calls_text",
        "usage_list",
        "timing_text",
        '["a"]',
        "nan_time",
    ]
    assert run["columns"]["llm_calls"][0] is None and run["columns"]["prompt_tokens"][0] is None
    assert run["columns"]["duration_s"][4] is None and run["columns"]["queued_s"][4] is None
    assert run["summary"]["damaged_lines"] >= 1 and run["events"]["damaged_lines"] == 1
    assert run["summary"]["llm_calls"] == 3  # the rows whose llm_calls is a number
    assert all(json.loads(line) for line in details[0])
    assert build_view([path]).startswith("<!DOCTYPE html>")
    assert view_cli(str(path), "--out", str(tmp_path / "odd.html")) == 0


def test_a_file_that_is_not_a_results_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = run_dir(tmp_path, "a", [HEADER, report("t1")], HAND_MADE)
    (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "empty.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    for name in ("a/events.jsonl", "passwd", "empty.jsonl"):
        with pytest.raises(CLIError, match="not a results file") as raised:
            view_cli(name)
        assert "\n" not in str(raised.value)
    assert not (tmp_path / "passwd.html").exists() and not (a / "events.html").exists()
    assert view_cli("a") == 0
    with pytest.raises(CLIError, match=r"a/view\.html: not a results file"):
        view_cli("a/view.html")  # the page itself, which would also be its own default out


def test_a_report_without_a_status_shows_as_the_summary_counts_it(tmp_path: Path) -> None:
    bare = {k: v for k, v in report("t2").items() if k != "status"}
    records = [HEADER, report("t1"), bare, report("t3", termination_reason="")]
    data, _ = view_data([run_dir(tmp_path, "r", records, None)])
    run = data["runs"][0]
    assert run["columns"]["status"] == ["success", "None", "success"]
    assert run["summary"]["statuses"] == {"success": 2, "None": 1}
    # A termination reason counted only when it is there, in the table as in the summary.
    assert run["columns"]["termination_reason"] == ["agent_stop", "agent_stop", None]
    assert run["summary"]["termination_reasons"] == {"agent_stop": 2}


def test_the_same_run_twice_gets_two_labels(tmp_path: Path) -> None:
    a = run_dir(tmp_path, "a", [HEADER, report("t1")], None)
    labels = [run["label"] for run in view_data([a, a, a / "results.jsonl"])[0]["runs"]]
    assert len(set(labels)) == 3


def test_a_replaced_report_leaves_no_cut_row_behind(tmp_path: Path) -> None:
    big = {"s": "y" * 9000}
    records = [HEADER, report("a", passed=False, traces=big), report("a", passed=True)]
    rows = read_rows(run_dir(tmp_path, "r", records, None) / "results.jsonl", row_cap=2000)
    assert rows.superseded == 1 and rows.truncated_rows == 0
    assert "truncated" not in json.loads(rows.details[0])


@pytest.mark.parametrize("cap", [30, 100, 1000])
def test_fit_text_never_exceeds_its_cap(cap: int) -> None:
    for value in ({'"' * 2000: 1}, {"\x01" * 900: [1]}, {"k" * 5000: 2}):
        text, cut = fit_text(value, cap)
        assert cut and cap * 0.6 <= len(text) <= cap  # as much of the head as fits
        assert json.loads(text)["_truncated_json"]


def test_the_details_budget_is_shared_by_the_runs_of_a_page(tmp_path: Path) -> None:
    big = {"s": "y" * 9000}
    runs = [
        run_dir(tmp_path, name, [HEADER] + [report(f"t{n}", traces=big) for n in range(50)], None)
        for name in ("a", "b", "c")
    ]
    _, details = view_data(runs, detail_budget=150 * 1000)
    assert sum(len(line) for lines in details for line in lines) <= 150 * 1000 + 150 * 50
    assert len(details[2][0]) > MIN_ROW_CAP  # the last run is not starved


def test_the_page_warns_of_runs_without_llm_calls_and_counts_cache_hits(tmp_path: Path) -> None:
    none = report("t1", usage={"llm_calls": 0})
    cached = report("t2", usage={"llm_calls": 3, "cache_hits": 2})
    data, _ = view_data([run_dir(tmp_path, "a", [HEADER, none], None)])
    assert data["runs"][0]["warnings"] == [NO_LLM_CALLS_ADVICE]
    data, _ = view_data([run_dir(tmp_path, "b", [HEADER, none, cached], None)])
    assert data["runs"][0]["warnings"] == [] and data["runs"][0]["summary"]["cache_hits"] == 2


def test_everything_embedded_is_used_by_the_page(tmp_path: Path) -> None:
    """No figure is computed for nothing: every key of a run in the log, of its stats, of a
    comparison and of the summary shown is read somewhere in the page's scripts."""
    scripts = "\n".join((VIEW_ASSETS / name).read_text() for name in SCRIPTS)
    a = run_dir(tmp_path, "a", [HEADER, report("t1")], HAND_MADE)
    b = run_dir(tmp_path, "b", [HEADER, report("t1")], None)
    data, _ = view_data([a, b])
    (segment,) = data["runs"][0]["events"]["runs"]
    keys = {*segment, *segment["stats"], *data["comparisons"][0], *data["runs"][0]}
    keys |= set(data["runs"][0]["events"]) | set(data["runs"][0]["events"]["check"])
    keys -= {"a", "b"}  # not there: the comparison does not repeat the runs' summaries
    unused = sorted(k for k in keys if not re.search(rf'\.{k}\b|"{k}"', scripts))
    assert unused == []
    assert "a" not in data["comparisons"][0] and "b" not in data["comparisons"][0]
    assert ".small" not in (VIEW_ASSETS / "view.css").read_text()


def test_each_script_file_is_short_and_the_page_holds_them_all() -> None:
    assert not (VIEW_ASSETS / "view.js").exists()
    for name in SCRIPTS:
        assert len((VIEW_ASSETS / name).read_text().splitlines()) < 300, name


# ---------- the command: what it writes, and where it will not ----------


def test_the_page_never_overwrites_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = run_dir(tmp_path, "a", [HEADER, report("t1")], HAND_MADE)
    before = {name: (a / name).read_bytes() for name in ("results.jsonl", "events.jsonl")}
    (tmp_path / "link.jsonl").symlink_to(a / "results.jsonl")
    monkeypatch.chdir(tmp_path)
    for out in ("a/results.jsonl", "a/events.jsonl", "./a/../a/results.jsonl", "link.jsonl"):
        with pytest.raises(CLIError, match="the page would overwrite") as raised:
            view_cli("a", "--out", out)
        assert "\n" not in str(raised.value)
    b = run_dir(tmp_path, "b", [HEADER, report("t1")], None)  # its events.jsonl is to come
    with pytest.raises(CLIError, match=r"would overwrite b/events\.jsonl"):
        view_cli("b", "--out", "b/events.jsonl")
    assert {name: (a / name).read_bytes() for name in before} == before
    assert not (b / "events.jsonl").exists()


def test_a_failed_write_leaves_the_old_page_and_no_half_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = run_dir(tmp_path, "a", [HEADER, report("t1")], HAND_MADE)
    monkeypatch.chdir(tmp_path)
    if Path("/dev/full").exists():
        with pytest.raises(CLIError, match=r"^/dev/full: No space left on device$"):
            view_cli("a", "--out", "/dev/full")
    page = a / "view.html"
    page.write_text("the old page")

    def full_disk(file: Any, parts: Any) -> int:
        file.write(b"<!DOCTYPE html> half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("asynceval.analysis.view._write_parts", full_disk)
    with pytest.raises(CLIError, match=r"view\.html: No space left on device$"):
        view_cli("a")
    assert page.read_text() == "the old page" and sorted(p.name for p in a.iterdir()) == [
        "events.jsonl",
        "results.jsonl",
        "view.html",
    ]
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert view_cli("a") == 0 and page.read_text().startswith("<!DOCTYPE html>")
    assert page.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_commands_messages_say_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir(tmp_path, "a", [HEADER, report("t1")], None)
    monkeypatch.chdir(tmp_path)
    for args, message in [
        (["missing.jsonl"], "missing.jsonl: no such file or directory"),
        (["a", "--out", ""], "--out: empty; give a file name such as view.html"),
        (["a", "--out", "nowhere/x.html"], "nowhere/x.html: No such file or directory"),
    ]:
        with pytest.raises(CLIError) as raised:
            view_cli(*args)
        assert str(raised.value) == message
