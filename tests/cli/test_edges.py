"""Edges of `asynceval` a person meets, each tried from outside (the CLI in a subprocess): what
they are told is one plain line, named for what happened, never a traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ._shell import asynceval

CLI = [sys.executable, "-m", "asynceval"]
ROOT = Path(__file__).resolve().parents[2]
ARITHMETIC = str(ROOT / "examples" / "arithmetic.py")


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a command that failed as a person's mistake should."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _closed_port() -> int:
    """A local port nobody listens on (bound, then closed): connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_refused_connection_is_called_a_refused_connection_not_a_timeout(
    tmp_path: Path, transport: str
) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"query": "What is 1 * 7?", "id": "t"}\n')
    done = asynceval(
        "run", ARITHMETIC, "--tasks", "tasks.jsonl", "--repeats", "1", "--quiet", "--out", "o",
        "--base-url", f"http://127.0.0.1:{_closed_port()}/v1", "--model", "m",
        cwd=tmp_path,
        env={"RETRY_MAX_ATTEMPTS": "1", "LLM_HTTP_TRANSPORT": transport},
    )  # fmt: skip
    lines = (tmp_path / "o" / "results.jsonl").read_text().splitlines()
    errors = [json.loads(line)["error"]["message"] for line in lines[1:]]
    assert len(errors) == 1, (done.stderr, lines)
    assert "ConnectError: connection refused" in errors[0] and "Timeout" not in errors[0]


NO_AGENTS = """
from asynceval import Benchmark, Task


class NoAgents(Benchmark):
    def default_tasks(self):
        return [Task(query="q", id="t")]
"""


@pytest.mark.parametrize("target", ["no_agents.py", "no_agents.py:NoAgents"])
def test_a_benchmark_without_setup_agents_is_named_with_what_it_lacks(
    tmp_path: Path, target: str
) -> None:
    (tmp_path / "no_agents.py").write_text(NO_AGENTS)
    done = asynceval("run", target, "--out", "o", cwd=tmp_path)
    assert _one_line(done).startswith(
        f"asynceval run: '{target}': the Benchmark class NoAgents cannot be built: "
        "it does not define setup_agents"
    )
    assert not (tmp_path / "o").exists()


def test_a_misspelt_setting_in_dotenv_is_one_warning_naming_the_closest(tmp_path: Path) -> None:
    """`MAX_CONCURENT_LLM_CALLS` (one letter off) and `LOGFILE` (no prefix of ours, one edit
    from LOG_FILE) would be ignored in silence: each is one warning line, shown once."""
    (tmp_path / ".env").write_text(
        "# limits\nMAX_CONCURENT_LLM_CALLS=1\nLOGFILE=run.log\nOPENAI_API_KEY=sk-x\n"
    )
    done = asynceval("run", ARITHMETIC, "--out", "o", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "asynceval: warning: MAX_CONCURENT_LLM_CALLS in .env line 2 is not an asynceval "
        "setting; did you mean MAX_CONCURRENT_LLM_CALLS?",
        "asynceval: warning: LOGFILE in .env line 3 is not an asynceval setting; "
        "did you mean LOG_FILE?",
    ]


def test_a_dotenv_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / ".env").write_bytes("LLM_MODEL=caf\xe9\n".encode("latin-1"))
    done = asynceval("run", ARITHMETIC, "--out", "o", cwd=tmp_path)
    assert _one_line(done) == (
        "asynceval run: .env: not UTF-8 text (invalid continuation byte at byte 13), so the "
        "settings in it cannot be read; save it as UTF-8"
    )
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/v1?key=hunter22", "http://127.0.0.1:9/v1#hunter22"]
)
def test_a_base_url_with_a_query_or_fragment_is_refused_without_repeating_it(
    tmp_path: Path, url: str
) -> None:
    """Every call would go to a wrong URL (a 404 each) while the run exits 0."""
    done = asynceval("run", ARITHMETIC, "--out", "o", "--base-url", url, cwd=tmp_path)
    line = _one_line(done)
    assert line.startswith(
        "asynceval run: LLM_BASE_URL must have no query string (?...) or fragment (#...)"
    )
    assert "http://127.0.0.1:9/v1" in line and "hunter22" not in line
    assert not (tmp_path / "o").exists()


HANGS = """
import anyio

from asynceval import Benchmark, Task


class Hangs(Benchmark):
    def default_tasks(self):
        return [Task(query=str(i), id=f"t{i}") for i in range(10)]

    async def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            await anyio.sleep(7 if query == "9" else 0.01)  # one repetition hangs
            return query

        return [agent], {}
"""


def _progress_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[") and " done " in line]


def test_the_eta_is_unknown_not_zero_while_a_repetition_hangs(tmp_path: Path) -> None:
    """9 of 10 repetitions end at once, the 10th takes 7 s: the plain line at 5 s must not
    promise the end in 0 s; the last line, at the end, says 0 s."""
    (tmp_path / "hangs.py").write_text(HANGS)
    done = asynceval("run", "hangs.py", "--out", "o", cwd=tmp_path)  # stdout a pipe: plain
    assert done.returncode == 0, done.stderr
    lines = _progress_lines(done.stdout)
    assert len(lines) == 2, done.stdout  # at 5 s, and at the end
    assert " done 9/10 " in lines[0] and lines[0].endswith("| ETA unknown"), lines[0]
    assert " done 10/10 " in lines[1] and lines[1].endswith("| ETA 0s"), lines[1]


def test_the_total_never_goes_negative_on_resume(tmp_path: Path) -> None:
    """A results file with successes outside this run's pairs (repeats 5 and 6 of a run of one
    repeat, as a run with more repeats leaves): the total left is 1 pair, never 3 - 4 = -1."""
    (tmp_path / "hangs.py").write_text(HANGS.replace("7 if", "0.01 if").replace("10)", "3)"))
    assert asynceval("run", "hangs.py", "--out", "o", "--quiet", cwd=tmp_path).returncode == 0
    results = tmp_path / "o" / "results.jsonl"
    header, *reports = results.read_text().splitlines()
    extra = [json.dumps({**json.loads(reports[0]), "repeat_idx": r}) for r in (5, 6)]
    results.write_text("\n".join([header, *reports[1:], *extra]) + "\n")  # t0's repeat 0 gone
    done = asynceval("run", "hangs.py", "--resume", "o", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = _progress_lines(done.stdout)[-1]
    assert "/-" not in last, last
    assert " done 1/1 " in last, last  # the CLI counts what was done before (already_done)


def test_the_total_on_resume_is_the_pairs_left_of_this_run(tmp_path: Path) -> None:
    """`already_done` counts only this run's pairs: with it the CLI's total is exact."""
    from asynceval.cli._progress import Progress, already_done
    from asynceval.engine import Task
    from asynceval.limits import ConcurrencyController

    results = tmp_path / "results.jsonl"
    lines = [{"type": "header"}] + [
        {"task_id": task_id, "repeat_idx": repeat, "status": "success"}
        for task_id, repeat in [("t1", 0), ("t2", 0), ("t1", 5), ("gone", 0)]
    ]
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tasks = [Task(query=str(i), id=f"t{i}") for i in range(3)]
    assert already_done(results, tasks, 1) == 2
    assert already_done(results, iter(tasks), 1) is None  # a stream is not consumed to count
    progress = Progress(ConcurrencyController(5), 3, "quiet", sys.stdout, already_done=2)
    progress.observe("run_started", {"resumed_pairs": 3})  # the engine's count: not this run's
    assert progress.line().startswith("[0s] done 0/1 |")


TINY = """
from asynceval import Benchmark, Task


class {name}(Benchmark):
    def default_tasks(self):
        return [Task(query=str(i), id=f"{prefix}{{i}}", evaluation_data={{"x": i}}) for i in range(3)]

    async def setup_agents(self, agent_data, environment, task, user):
        return [lambda query: query], {{}}

    async def setup_evaluators(self, environment, task, agents, user):
        return [lambda task, answer, traces: {{"passed": True}}]
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run directories: `one` of benchmark One, `two` of Two on the same task
    ids, `other` of One on other task ids; and files that are no results file. Read only."""
    tmp_path = tmp_path_factory.mktemp("runs")
    for module, name, prefix in (("one", "One", "t"), ("two", "Two", "t"), ("other", "One", "u")):
        (tmp_path / f"{module}.py").write_text(TINY.format(name=name, prefix=prefix))
    for module, out in (("one", "one"), ("two", "two"), ("other", "other")):
        done = asynceval("run", f"{module}.py", "--out", out, "--quiet", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    (tmp_path / "notes.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "folder").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ("two", "one/results.jsonl is a run of benchmark One and two/results.jsonl of Two: "
         "compare two runs of one benchmark (--any-benchmark pairs them all the same)"),
        ("other", "one/results.jsonl and other/results.jsonl have no repetition in common (their "
         "3 and 3 pairs of task_id and repeat_idx all differ): runs of different tasks"),
        ("notes.jsonl", "notes.jsonl: not an asynceval results file (no run header and no "
         "report line)"),
        ("one/events.jsonl", "one/events.jsonl: an events file, not a results file (asynceval "
         "logs check reads it; report, compare and view read a run's results.jsonl)"),
        ("empty.jsonl", "empty.jsonl: holds no results"),
        ("folder", "folder: no results file there"),
    ],
)  # fmt: skip
def test_compare_on_the_wrong_shapes_is_one_line(runs: Path, other: str, message: str) -> None:
    assert (
        _one_line(asynceval("compare", "one", other, cwd=runs)) == f"asynceval compare: {message}"
    )


def test_compare_pairs_two_benchmarks_when_asked_and_hand_edited_ids(runs: Path) -> None:
    done = asynceval("compare", "one", "two", "--any-benchmark", "--json", cwd=runs)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n_pairs"] == 3
    edited = (runs / "one" / "results.jsonl").read_text()
    edited = edited.replace('"task_id": "t0"', '"task_id": ["t0"]')  # no engine writes that
    for name in ("a.jsonl", "b.jsonl"):
        (runs / name).write_text(edited)
    done = asynceval("compare", "a.jsonl", "b.jsonl", "--json", cwd=runs)  # paired, no crash
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n_pairs"] == 3


@pytest.mark.parametrize("command", ["view", "report"])
def test_report_and_view_on_a_file_that_is_not_results_is_one_line(
    runs: Path, command: str
) -> None:
    for path, message in [
        ("one/events.jsonl", "one/events.jsonl: an events file, not a results file"),
        ("notes.jsonl", "notes.jsonl: not "),
    ]:
        line = _one_line(asynceval(command, path, cwd=runs))
        assert line.startswith(f"asynceval {command}: {message}"), line
