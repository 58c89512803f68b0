"""The run directory as one object, from outside (the CLI in subprocesses): its manifest, one
writer at a time, `--resume DIR` alone finishing exactly what is missing, signals, the call
journal after a kill -9 (the simulated provider's own request count), unique default folders."""

from __future__ import annotations

import json
import random
import shlex
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from asynceval.engine import read_records

from ._shell import asynceval, start

HERE = Path(__file__).parent
SLOW = str(HERE / "slow_bench.py")
TURNS = str(HERE / "turns_bench.py")
CLI = [sys.executable, "-m", "asynceval"]


def wait_for_reports(results: Path, at_least: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") > at_least:
            return
        time.sleep(0.02)
    raise AssertionError(f"{results}: fewer than {at_least} reports after {timeout} s")


def success_pairs(results: Path) -> Counter[tuple[str, int]]:
    records, damaged = read_records(results)
    assert damaged == 0
    return Counter((r["task_id"], r["repeat_idx"]) for r in records if r.get("status") == "success")


def tasks_file(path: Path, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"file-{i}", "query": f"What is {i} + 2?"}) + "\n" for i in range(n)
        )
    )
    return path


def test_the_hint_after_ctrl_c_finishes_exactly_the_tasks_of_the_file(tmp_path: Path) -> None:
    """The hint once mixed the benchmark's 60 built-in tasks into a run of a 30-task file and
    left some of the file's tasks out, exit 0."""
    tasks_file(tmp_path / "tasks.jsonl", 30)
    args = ("run", SLOW, "--tasks", "tasks.jsonl", "--repeats", "4", "--out", "r1")
    first = start(*args, cwd=tmp_path)
    wait_for_reports(tmp_path / "r1" / "results.jsonl", 10)
    first.send_signal(signal.SIGINT)
    _, stderr = first.communicate(timeout=30)
    assert first.returncode == 130, stderr
    hint = stderr.strip().splitlines()[-1]
    assert hint.endswith("finish the rest with: asynceval run --resume r1"), hint
    command = shlex.split(hint.rpartition("finish the rest with: ")[2])
    assert command == ["asynceval", "run", "--resume", "r1"]
    resumed = asynceval(*command[1:], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    pairs = success_pairs(tmp_path / "r1" / "results.jsonl")
    assert pairs == Counter({(f"file-{i}", r): 1 for i in range(30) for r in range(4)})
    manifest = json.loads((tmp_path / "r1" / "run.json").read_text())
    assert [s["resumed"] for s in manifest["segments"]] == [False, True]
    assert manifest["computes"]["tasks"]["rows"] == 30
    assert manifest["computes"]["options"]["repeats"] == 4


def test_a_second_run_on_a_directory_in_use_exits_2_naming_the_holder(tmp_path: Path) -> None:
    first = start("run", SLOW, "--out", "d", "--quiet", cwd=tmp_path)
    wait_for_reports(tmp_path / "d" / "results.jsonl", 2)
    before = (tmp_path / "d" / "results.jsonl").read_bytes()
    for args in (("run", SLOW, "--out", "d"), ("run", "--resume", "d")):
        second = asynceval(*args, cwd=tmp_path)
        assert second.returncode == 2, second.stderr
        (line,) = second.stderr.strip().splitlines()
        assert f"pid {first.pid} on {socket.gethostname()}" in line, line
    assert first.wait(timeout=60) == 0
    assert (tmp_path / "d" / "results.jsonl").read_bytes().startswith(before)
    assert success_pairs(tmp_path / "d" / "results.jsonl") == Counter(
        {(f"slow-{i}", 0): 1 for i in range(60)}
    )


def test_resume_refuses_what_is_not_a_run_and_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "d"
    out.mkdir()
    (out / "results.jsonl").write_text("this is not JSON\n")
    done = asynceval("run", SLOW, "--resume", "d", cwd=tmp_path)
    assert done.returncode == 2 and "not an asynceval results file" in done.stderr
    assert (out / "results.jsonl").read_text() == "this is not JSON\n"
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl"]  # nothing else written
    assert asynceval("run", "--resume", "d", cwd=tmp_path).returncode == 2  # no target: no run.json
    (out / "run.json").write_text("[1, 2]")
    done = asynceval("run", "--resume", "d", cwd=tmp_path)
    assert done.returncode == 2 and "not a run manifest" in done.stderr
    assert asynceval("run", "--resume", "nowhere", cwd=tmp_path).returncode == 2


def test_resume_takes_its_options_from_the_manifest_and_refuses_a_different_computation(
    tmp_path: Path,
) -> None:
    tasks = tasks_file(tmp_path / "tasks.jsonl", 6)
    done = asynceval(
        "run",
        SLOW,
        "--tasks",
        "tasks.jsonl",
        "--repeats",
        "2",
        "--out",
        "d",
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    for args, named in (
        (("--repeats", "3"), "--repeats 3 differs from the run's 2"),
        (("--model", "other"), "--model other differs from the run's none"),
        ((str(HERE / "turns_bench.py"),), "TARGET"),
        (("--tasks", "other.jsonl"), "--tasks other.jsonl differs"),
    ):
        refused = asynceval("run", *args, "--resume", "d", cwd=tmp_path)
        assert refused.returncode == 2, refused.stderr
        assert named in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    again = asynceval(
        "run",
        "--resume",
        "d",
        "--repeats",
        "2",
        "--max-concurrent-llm-calls",
        "2",
        "--quiet",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr
    manifest = json.loads((tmp_path / "d" / "run.json").read_text())
    assert manifest["segments"][-1]["how"]["max_concurrent_llm_calls"] == 2
    with tasks.open("a") as file:
        file.write(json.dumps({"id": "file-new", "query": "What is 1 + 1?"}) + "\n")
    changed = asynceval("run", "--resume", "d", cwd=tmp_path)
    assert changed.returncode == 2 and "changed since the run started" in changed.stderr
    assert success_pairs(tmp_path / "d" / "results.jsonl") == Counter(
        {(f"file-{i}", r): 1 for i in range(6) for r in range(2)}
    )


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_end_a_run_as_ctrl_c_does(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    run = start("run", SLOW, "--out", "d", cwd=tmp_path)
    wait_for_reports(tmp_path / "d" / "results.jsonl", 4)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=30)
    assert run.returncode == status, stderr
    assert stderr.strip().endswith("finish the rest with: asynceval run --resume d")
    assert f"stopped by {signum.name}" in stderr
    lines = [json.loads(x) for x in (tmp_path / "d" / "events.jsonl").read_text().splitlines()]
    (finished,) = [e for e in lines if e["event"] == "run_finished"]
    assert finished["interrupted"] is True
    resumed = asynceval("run", "--resume", "d", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert success_pairs(tmp_path / "d" / "results.jsonl") == Counter(
        {(f"slow-{i}", 0): 1 for i in range(60)}
    )


def test_runs_started_together_without_out_each_get_their_own_directory(tmp_path: Path) -> None:
    runs = [start("run", SLOW, "--quiet", cwd=tmp_path) for _ in range(3)]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    folders = sorted((tmp_path / "results").iterdir())
    assert len(folders) == 3
    assert sorted(out.strip() for out, _ in outputs) == [
        f"results: results/{f.name}" for f in folders
    ]
    for folder in folders:
        manifest = json.loads((folder / "run.json").read_text())
        assert folder.name == f"slow_bench-{manifest['run_id']}"
        assert sum(success_pairs(folder / "results.jsonl").values()) == 60


def test_a_run_killed_at_a_random_point_then_resumed_sends_no_finished_call_twice(
    tmp_path: Path, sim_server: Callable[..., str]
) -> None:
    """24 agents of 6 calls each, 4 calls at once: a kill -9 part-way, then `--resume DIR`.
    Every (task, repeat) is in the results exactly once, and the provider received each of the
    144 calls once, plus at most the 4 that were in flight when the process died."""
    base_url = sim_server("--latency", "0.05")
    stats = base_url.removesuffix("/v1") + "/stats"
    args = ("run", TURNS, "--base-url", base_url, "--model", "sim", "--out", "d", "--quiet")
    run = start(*args, "--max-concurrent-llm-calls", "4", cwd=tmp_path)
    time.sleep(random.uniform(1.0, 2.0))
    run.send_signal(signal.SIGKILL)
    run.wait()
    before = success_pairs(tmp_path / "d" / "results.jsonl")
    sent_before = httpx.get(stats).json()["requests"]
    assert 0 < sent_before < 144, "the kill should land in the middle of the run"
    resumed = asynceval("run", "--resume", "d", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "takes it over" in resumed.stderr  # the dead run's lock, said once
    after = success_pairs(tmp_path / "d" / "results.jsonl")
    assert after == Counter({(f"turns-{i}", 0): 1 for i in range(24)})
    sent = httpx.get(stats).json()["requests"]
    assert 144 <= sent <= 144 + 4, (sent_before, sent, len(before))
    records = read_records(tmp_path / "d" / "results.jsonl")[0]
    replayed = sum(r["usage"].get("journal_hits", 0) for r in records if "usage" in r)
    assert replayed == sent_before - (sent - 144) - 6 * len(before)
    summary = json.loads(asynceval("report", "d", "--json", cwd=tmp_path).stdout)
    assert summary["journal_hits"] == replayed and summary["llm_calls"] == 144


def test_report_and_view_show_how_the_run_was_started(tmp_path: Path) -> None:
    tasks_file(tmp_path / "tasks.jsonl", 3)
    done = asynceval("run", SLOW, "--tasks", "tasks.jsonl", "--out", "d", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "d" / "run.json").read_text())
    report = asynceval("report", "d", cwd=tmp_path, env={"COLUMNS": "400"})
    assert report.returncode == 0, report.stderr
    assert f"{tmp_path / 'tasks.jsonl'} (jsonl, 3 rows, sha256 " in report.stdout
    assert manifest["run_id"] in report.stdout and "(Slow)" in report.stdout
    as_json = json.loads(asynceval("report", "d", "--json", cwd=tmp_path).stdout)
    assert as_json["run"] == manifest
    view = asynceval("view", "d", "--out", "page.html", cwd=tmp_path)
    assert view.returncode == 0, view.stderr
    assert "(jsonl, 3 rows, sha256 " in (tmp_path / "page.html").read_text()


def test_a_resume_keeps_the_model_the_run_had_wherever_it_came_from(tmp_path: Path) -> None:
    tasks_file(tmp_path / "tasks.jsonl", 2)
    first = asynceval(
        "run",
        SLOW,
        "--tasks",
        "tasks.jsonl",
        "--out",
        "e",
        "--quiet",
        cwd=tmp_path,
        env={"LLM_MODEL": "m1"},
    )
    assert first.returncode == 0, first.stderr
    other = asynceval("run", "--resume", "e", "--model", "m2", cwd=tmp_path)
    assert other.returncode == 2 and "--model m2 differs from the run's m1" in other.stderr
    same = asynceval("run", "--resume", "e", "--model", "m1", "--quiet", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    moved = asynceval("run", "--resume", "e", "--quiet", cwd=tmp_path, env={"LLM_MODEL": "m2"})
    assert moved.returncode == 0, moved.stderr
    headers = [r for r in read_records(tmp_path / "e" / "results.jsonl")[0] if r.get("type")]
    assert [h["settings"]["llm_model"] for h in headers] == ["m1", "m1", "m1"]
