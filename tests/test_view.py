"""`asynceval view`: the numbers the page is given (events reduced to time buckets, the table,
the details and their caps, several runs), the page's escaping, and the command's errors. The
page itself, rendered by a real browser, is tested in test_view_browser.py."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from asynceval.analysis import check_events
from asynceval.analysis._view_rows import MIN_ROW_CAP, fit_text, read_rows
from asynceval.analysis.view import build_view, script_json, view_data
from asynceval.cli._errors import CLIError
from asynceval.cli._view import add_parser

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
    assert events["present"] and events["damaged_lines"] == 2 and events["events"] == 13
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
    assert second["limit"] == 7 and second["stats"]["max_in_flight"] == 1
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
    assert events == {**events, "present": False, "runs": [], "events": 0}


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
    assert columns["error"][1] == "AgentError: it broke badly"
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
        (["missing"], "missing: no such directory"),
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
