"""The command line with real subprocesses: run, resume after Ctrl-C, overrides, the errors a
person makes, report, logs check, and the progress display with and without a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from asynceval.engine import read_records

from ._shell import asynceval

ROOT = Path(__file__).parents[2]
SLOW = str(Path(__file__).parent / "slow_bench.py")
ARITHMETIC = str(ROOT / "examples" / "arithmetic.py")
CLI = [sys.executable, "-m", "asynceval"]


def events_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_run_writes_results_and_events_and_a_summary(tmp_path: Path) -> None:
    done = asynceval("run", ARITHMETIC, "--out", "out", "--repeats", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records, damaged = read_records(tmp_path / "out" / "results.jsonl")
    assert damaged == 0 and records[0]["type"] == "header" and len(records) == 1 + 80
    events = events_of(tmp_path / "out" / "events.jsonl")
    names = Counter(str(e["event"]) for e in events)
    assert names["run_started"] == 1 and names["task_finished"] == 80 and names["acquired"] == 80
    assert "pass rate" in done.stdout and "/80 = " in done.stdout
    assert "done 80/80" in done.stdout  # the plain progress line (stdout is not a terminal)


def test_default_output_directory_is_named_after_the_target(tmp_path: Path) -> None:
    done = asynceval("run", ARITHMETIC, "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (out,) = (tmp_path / "results").iterdir()
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    assert out.name == f"arithmetic-{run_id}" and (out / "results.jsonl").is_file()
    assert done.stdout == f"results: results/{out.name}\n"  # quiet: only where it went


def test_options_beat_the_environment_and_dotenv(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MAX_CONCURRENT_LLM_CALLS=2\nLLM_CALL_TIMEOUT=33\n")
    env = {"MAX_CONCURRENT_LLM_CALLS": "3"}
    done = asynceval(
        "run", ARITHMETIC, "--out", "o", "--max-concurrent-llm-calls", "7", "--quiet",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (started,) = [
        e for e in events_of(tmp_path / "o" / "events.jsonl") if e["event"] == "run_started"
    ]
    assert started["max_concurrent_llm_calls"] == 7  # the option beats the environment
    assert started["llm_call_timeout"] == 33  # .env still applies where no option is given


def test_ctrl_c_then_resume_finishes_without_rerunning_successes(tmp_path: Path) -> None:
    first = subprocess.Popen(
        [*CLI, "run", SLOW, "--out", "o"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    results = tmp_path / "o" / "results.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 12:
            break
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=30)
    assert first.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    finished_first = {
        r["task_id"] for r in read_records(results)[0] if r.get("status") == "success"
    }
    assert 10 <= len(finished_first) < 60

    second = asynceval("run", SLOW, "--resume", "o", "--quiet", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    records, _ = read_records(results)
    successes = Counter(r["task_id"] for r in records if r.get("status") == "success")
    assert len(successes) == 60 and set(successes.values()) == {1}
    events = events_of(tmp_path / "o" / "events.jsonl")
    runs = [i for i, e in enumerate(events) if e["event"] == "run_started"]
    started_again = {e["task_id"] for e in events[runs[1] :] if e["event"] == "task_started"}
    assert not started_again & finished_first  # successes were not run again
    interrupted = [e for e in events if e["event"] == "run_finished"]
    assert interrupted[0]["interrupted"] is True and interrupted[1]["interrupted"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.py"], "no such file"),
        (["run", "broken.py"], "failed to import: SyntaxError"),
        (["run", f"{SLOW}:not_a_benchmark"], "is not a Benchmark"),
        (["run", "no_such_module:thing"], "no such module"),
        (["run", SLOW, "--tasks", "bad.jsonl"], "bad.jsonl:2:"),
        (["run", SLOW, "--max-concurrent-llm-calls", "0"], "MAX_CONCURRENT_LLM_CALLS must be >= 1, got 0"),
        (["run", SLOW, "--out", "a_file/sub"], "cannot write to a_file/sub"),
        (["run", SLOW, "--resume", "empty_dir"], "no run there (no run.json, no results.jsonl)"),
        (["run", SLOW, "--repeats", "0"], "--repeats must be >= 1"),
        (["report", "nowhere.jsonl"], "no results file there"),
        (["logs", "check", "nowhere.jsonl"], "no such file"),
    ],
)  # fmt: skip
def test_a_persons_mistake_gets_one_line_and_a_nonzero_exit(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "broken.py").write_text("def oops(:\n")
    (tmp_path / "bad.jsonl").write_text('{"query": "fine"}\n{"query": 1, "colour": "red"}\n')
    (tmp_path / "a_file").write_text("")
    (tmp_path / "empty_dir").mkdir()
    done = asynceval(*args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()  # a failed start leaves no empty run directory


def test_report_reads_any_results_file(tmp_path: Path) -> None:
    assert asynceval("run", ARITHMETIC, "--out", "o", "--quiet", cwd=tmp_path).returncode == 0
    done = asynceval("report", "o/results.jsonl", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["repetitions"] == 40 and summary["scored"] == 40
    assert summary["statuses"] == {"success": 40} and 0 < summary["pass_rate"] < 1
    low, high = summary["pass_rate_ci95"]
    assert low < summary["pass_rate"] < high
    table = asynceval("report", "o", cwd=tmp_path)
    assert table.returncode == 0 and "pass rate" in table.stdout


def test_logs_check_exit_codes(tmp_path: Path) -> None:
    assert asynceval("run", ARITHMETIC, "--out", "o", "--quiet", cwd=tmp_path).returncode == 0
    clean = asynceval("logs", "check", "o/events.jsonl", cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "max in flight     5 (limit 5: held)" in clean.stdout
    events = (tmp_path / "o" / "events.jsonl").read_text().splitlines()
    first_acquired = next(i for i, line in enumerate(events) if '"acquired"' in line)
    extra = [json.dumps({"event": "acquired", "call_id": f"x{i}", "wait_s": 0}) for i in range(5)]
    (tmp_path / "over.jsonl").write_text(
        "\n".join(events[: first_acquired + 1] + extra + events[first_acquired + 1 :]) + "\n"
    )
    over = asynceval("logs", "check", "over.jsonl", "--json", cwd=tmp_path)
    assert over.returncode == 1 and json.loads(over.stdout)["limit_held"] is False
    (tmp_path / "garbage.jsonl").write_text('{"event": "queueing"}\nthis is not json\n')
    garbage = asynceval("logs", "check", "garbage.jsonl", cwd=tmp_path)
    assert garbage.returncode == 2 and "garbage.jsonl:2:" in garbage.stderr


def test_logs_check_finds_an_unresolved_429(tmp_path: Path) -> None:
    lines = [
        {"event": "run_started", "max_concurrent_llm_calls": 2},
        {"event": "queueing", "call_id": "a"}, {"event": "acquired", "call_id": "a"},
        {"event": "released", "call_id": "a"},
        {"event": "retry", "call_id": "a", "status_code": 429, "attempt": 1},
        {"event": "queueing", "call_id": "b"}, {"event": "acquired", "call_id": "b"},
        {"event": "released", "call_id": "b"},
        {"event": "retry", "call_id": "b", "status_code": 429, "attempt": 1},
        {"event": "queueing", "call_id": "b"}, {"event": "acquired", "call_id": "b"},
        {"event": "released", "call_id": "b"},
    ]  # fmt: skip
    (tmp_path / "e.jsonl").write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    done = asynceval("logs", "check", "e.jsonl", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["unresolved_429"] == ["a"]  # b's retry succeeded


def test_live_progress_on_a_terminal(tmp_path: Path) -> None:
    """With a pseudo-terminal the live view shows the calls in flight against the limit."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*CLI, "run", SLOW, "--out", "o"],
        cwd=tmp_path, stdin=follower, stdout=follower, stderr=follower,
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
    )  # fmt: skip
    os.close(follower)
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(leader)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text
    assert "LLM calls in flight" in text and "/ 5" in text
    assert "\x1b[" in text  # redrawn in place with terminal control codes


def test_resuming_a_run_of_tasks_without_ids_runs_and_counts_nothing_twice(tmp_path: Path) -> None:
    """Tasks with no id get ids from their content, the same in the resumed process."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {
                    "query": f"What is {n} + 1?",
                    "evaluation_data": {"expected": str(n + 1)},
                    "metadata": {"operator": "+"},
                }
            )
            + "\n"
            for n in range(6)
        )
    )
    first = asynceval("run", ARITHMETIC, "--tasks", "tasks.jsonl", "--out", "o", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = asynceval("run", ARITHMETIC, "--tasks", "tasks.jsonl", "--resume", "o", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    records, _ = read_records(tmp_path / "o" / "results.jsonl")
    reports = [r for r in records if r.get("type") != "header"]
    assert len(reports) == 6 and len({r["task_id"] for r in reports}) == 6
    report = asynceval("report", "o/results.jsonl", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "repetitions" in report.stdout and " 6 " in report.stdout


def test_two_tasks_with_one_id_in_a_task_file_stop_the_run_before_anything_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"query": "a", "id": "x"}\n{"query": "b", "id": "x"}\n')
    done = asynceval("run", ARITHMETIC, "--tasks", "tasks.jsonl", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2
    assert "task id 'x' appears twice" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


PASS_FOUR_OF_FIVE = """
from asynceval import Benchmark, Task


class FourOfFive(Benchmark):
    def default_tasks(self):
        return [Task(query=i, id=f"t{i}") for i in range(5)]

    async def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            return query

        return [agent], {}

    async def setup_evaluators(self, environment, task, agents, user):
        return [lambda task, answer, traces: {"passed": answer != 4}]


benchmark = FourOfFive
"""


def test_the_live_pass_rate_is_the_one_the_summary_shows(tmp_path: Path) -> None:
    """The progress line's figure is the summary's pass rate, not the share of `success`."""
    (tmp_path / "four.py").write_text(PASS_FOUR_OF_FIVE)
    done = asynceval("run", "four.py", "--out", "o", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert "pass rate 80.0% of 5 scored" in progress[-1]
    assert "4/5 = 80.0%" in done.stdout


def _log(tmp_path: Path, name: str, lines: list[dict[str, object]]) -> str:
    (tmp_path / name).write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    return name


def _calls(prefix: str, n: int, task: str | None = None) -> list[dict[str, object]]:
    """n calls acquired together, then released."""
    ids = [f"{prefix}{i}" for i in range(n)]
    tags = {"task_id": task, "repeat_idx": 0} if task else {}
    return [{"event": "acquired", "call_id": c, **tags} for c in ids] + [
        {"event": "released", "call_id": c, **tags} for c in ids
    ]


def test_logs_check_checks_each_run_against_its_own_limit(tmp_path: Path) -> None:
    """A resumed run with a lower limit appends to the file: each run is held to its own."""
    name = _log(
        tmp_path,
        "two_runs.jsonl",
        [
            {"event": "run_started", "max_concurrent_llm_calls": 3},
            *_calls("a", 3),
            {"event": "run_started", "max_concurrent_llm_calls": 1},
            *_calls("b", 1),
        ],
    )
    done = asynceval("logs", "check", name, "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert [(r["limit"], r["max_in_flight"]) for r in report["runs"]] == [(3, 3), (1, 1)]
    bad = _log(
        tmp_path,
        "bad.jsonl",
        [
            {"event": "run_started", "max_concurrent_llm_calls": 3},
            *_calls("a", 2),
            {"event": "run_started", "max_concurrent_llm_calls": 1},
            *_calls("b", 2),
        ],
    )
    assert asynceval("logs", "check", bad, cwd=tmp_path).returncode == 1


def test_a_killed_runs_calls_do_not_count_in_the_next_run(tmp_path: Path) -> None:
    name = _log(
        tmp_path,
        "killed.jsonl",
        [
            {"event": "run_started", "max_concurrent_llm_calls": 2},
            {"event": "acquired", "call_id": "lost1"},
            {"event": "acquired", "call_id": "lost2"},  # killed here: never released
            {"event": "run_started", "max_concurrent_llm_calls": 2},
            *_calls("b", 2),
        ],
    )
    done = asynceval("logs", "check", name, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert "max in flight     2 (limit 2: held)" in done.stdout


def test_a_429_whose_task_timed_out_while_waiting_is_not_unresolved(tmp_path: Path) -> None:
    tags = {"task_id": "t", "repeat_idx": 0}
    name = _log(
        tmp_path,
        "timeout.jsonl",
        [
            {"event": "run_started", "max_concurrent_llm_calls": 2},
            {"event": "acquired", "call_id": "c", **tags},
            {"event": "released", "call_id": "c", **tags},
            {"event": "retry", "call_id": "c", "status_code": 429, "attempt": 1, **tags},
            {"event": "task_finished", "status": "task_timeout", **tags},
        ],
    )
    done = asynceval("logs", "check", name, "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["unresolved_429"] == []


def test_a_log_without_call_events_cannot_be_checked(tmp_path: Path) -> None:
    name = _log(
        tmp_path,
        "no_calls.jsonl",
        [
            {"event": "run_started", "max_concurrent_llm_calls": 5},
            {"event": "task_finished", "task_id": "t", "repeat_idx": 0, "status": "success"},
        ],
    )
    done = asynceval("logs", "check", name, cwd=tmp_path)
    assert done.returncode == 1
    assert "cannot check" in done.stdout and ": held" not in done.stdout


def test_the_events_file_of_a_cli_run_is_checkable_whatever_log_level_and_format(
    tmp_path: Path,
) -> None:
    env = {"LOG_LEVEL": "WARNING", "LOG_FORMAT": "console"}
    done = asynceval("run", ARITHMETIC, "--out", "o", "--quiet", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    events = events_of(tmp_path / "o" / "events.jsonl")  # JSON lines, or this would fail
    assert sum(e["event"] == "acquired" for e in events) == 40
    check = asynceval("logs", "check", "o", cwd=tmp_path)
    assert check.returncode == 0 and "(limit 5: held)" in check.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "tasks.jsonl: no tasks in the file"),
        ("\n\n", "tasks.jsonl: no tasks in the file"),
        ('{"query": "a"}\n{"query": ', "tasks.jsonl:2: not valid JSON"),
        ('{"id": "x"}\n', "tasks.jsonl:1: query: missing"),
        ('{"query": "q", "metadata": 3}\n', "tasks.jsonl:1: metadata must be an object, got 3"),
        (b"\x7fELF\x02\x01\x01\x00\xd0\xff\n", "tasks.jsonl:1: not UTF-8 text"),
        (None, "tasks.jsonl: a directory, not a task file"),
    ],
)
def test_a_bad_task_file_is_one_line_naming_file_line_and_field(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    target = tmp_path / "tasks.jsonl"
    if content is None:
        target.mkdir()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    done = asynceval("run", ARITHMETIC, "--tasks", "tasks.jsonl", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == f"asynceval run: {message}" or message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/v1", "LLM_BASE_URL must be an http(s) URL"),
        ("localhost:8000/v1", "LLM_BASE_URL must be an http(s) URL"),
        ("https://user:hunter22@host/v1", "LLM_BASE_URL must not hold credentials"),
    ],
)
def test_a_bad_base_url_stops_the_run_before_anything_runs(
    tmp_path: Path, url: str, message: str
) -> None:
    done = asynceval("run", ARITHMETIC, "--out", "o", cwd=tmp_path, env={"LLM_BASE_URL": url})
    assert done.returncode == 2 and message in done.stderr
    assert "hunter22" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


def test_a_mistyped_setting_gets_a_warning_naming_the_closest(tmp_path: Path) -> None:
    env = {"MAX_CONCURENT_LLM_CALLS": "3"}
    done = asynceval("run", ARITHMETIC, "--out", "o", "--quiet", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert (
        "asynceval: warning: MAX_CONCURENT_LLM_CALLS is not an asynceval setting; "
        "did you mean MAX_CONCURRENT_LLM_CALLS?"
    ) in done.stderr
