"""User mistakes that end `asynceval run` in one line on stderr, exit status 2 and no traceback:
a disk that refuses the results or the events file part-way through a run (every line already
written stays whole, and `--resume` finishes the run once there is room), and every way a TARGET
can fail to load (nothing is written then).

A full disk is made reproducible without root or mounts in two ways that exercise different
paths: RLIMIT_FSIZE (with SIGXFSZ ignored) makes writes past N bytes fail with EFBIG after some
reports are on disk, part-way through a line; a symlink to /dev/full fails every write with
ENOSPC from the first byte on, where nothing can be cut back.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from asynceval._writer import AppendOnlyFile
from asynceval.engine import read_records

CLI = [sys.executable, "-m", "asynceval"]
ARITHMETIC = str(Path(__file__).parents[2] / "examples" / "arithmetic.py")
needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
N_TASKS = 40

# 40 tasks of ~0.05 s, 4 at a time, one simulated LLM call each; PAD characters in each report
# (through the evaluator's result) decide which file fills up first.
PADDED_BENCH = """
import os

import anyio

from asynceval import Benchmark, OpenAIChatModel, Task

PAD = int(os.environ.get("PAD", "0"))


class Padded(Benchmark):
    def __init__(self):
        super().__init__(max_concurrent_tasks=4)

    def default_tasks(self):
        return [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(40)]

    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel(settings=self.settings)

        async def agent(query):
            await anyio.sleep(0.05)
            async with model:
                return (await model.generate(query)).text

        return [agent], {}

    async def setup_evaluators(self, environment, task, agents, user):
        return [lambda task, answer, traces: {"passed": True, "pad": "x" * PAD}]
"""


def _file_size_limit(limit: int | None) -> Callable[[], None] | None:
    """A preexec_fn making writes past `limit` bytes fail with EFBIG (not kill the process)."""
    if limit is None:
        return None

    def limit_writes() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


def asynceval(
    *args: str, cwd: Path, pad: int = 0, file_size_limit: int | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "PAD": str(pad)},
        preexec_fn=_file_size_limit(file_size_limit),
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a run that failed as a person's mistake should."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _whole_lines(path: Path) -> list[dict[str, object]]:
    """Every line of a JSONL file, parsed: it fails on a line cut short."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), data[-80:]
    return [json.loads(line) for line in data.splitlines()]


def _reports(path: Path) -> list[dict[str, object]]:
    return [r for r in _whole_lines(path) if r.get("type") != "header"]


def _resume_finishes_the_run(tmp_path: Path) -> None:
    """`--resume o` (with room again) runs what is missing: each task succeeds exactly once."""
    done = asynceval("run", "padded.py", "--resume", "o", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    successes = Counter(r["task_id"] for r in _reports(tmp_path / "o" / "results.jsonl"))
    assert len(successes) == N_TASKS and set(successes.values()) == {1}
    report = subprocess.run(
        [*CLI, "report", "o", "--json"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert report.returncode == 0 and json.loads(report.stdout)["repetitions"] == N_TASKS


def _stopped_line(file: str, code: int) -> str:
    return (
        f"asynceval run: cannot write o/{file}: [Errno {code}] {os.strerror(code)}; the run "
        "stopped, the reports written so far are intact; once there is room, finish it with: "
        "asynceval run --resume o"
    )


def test_results_file_over_the_size_limit_stops_the_run_and_resume_finishes_it(
    tmp_path: Path,
) -> None:
    """3 KB reports fill results.jsonl first: the write that crosses the limit is cut back."""
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    done = asynceval(
        "run",
        "padded.py",
        "--out",
        "o",
        "--quiet",
        "--no-journal",  # the journal: see below
        cwd=tmp_path,
        pad=3000,
        file_size_limit=20000,
    )
    assert _one_line(done) == _stopped_line("results.jsonl", errno.EFBIG)
    written = _reports(tmp_path / "o" / "results.jsonl")
    assert 1 <= len(written) < N_TASKS  # some reports kept, the run did not go on regardless
    _whole_lines(tmp_path / "o" / "events.jsonl")
    _resume_finishes_the_run(tmp_path)


def test_events_file_over_the_size_limit_stops_the_run_and_resume_finishes_it(
    tmp_path: Path,
) -> None:
    """Small reports: events.jsonl (about 1 KB of events per task) fills first. `events` never
    raises into a call, so the CLI watches its file and stops the run."""
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    done = asynceval(
        "run", "padded.py", "--out", "o", "--no-journal", cwd=tmp_path, file_size_limit=12000
    )
    assert _one_line(done) == _stopped_line("events.jsonl", errno.EFBIG)
    events = _whole_lines(tmp_path / "o" / "events.jsonl")
    assert events[0]["event"] == "run_started"
    assert len(_reports(tmp_path / "o" / "results.jsonl")) < N_TASKS
    _resume_finishes_the_run(tmp_path)
    check = subprocess.run(
        [*CLI, "logs", "check", "o"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr  # both runs' events read whole


def test_a_call_journal_that_cannot_be_written_is_one_line_before_the_run(
    tmp_path: Path,
) -> None:
    """Under a 12 KB file size limit the journal's SQLite file cannot even be made: said at
    start, naming it and the way around it, with no report written."""
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    done = asynceval("run", "padded.py", "--out", "o", cwd=tmp_path, file_size_limit=12000)
    line = _one_line(done)
    assert line.startswith("asynceval run: cannot write the call journal ")
    assert "o/journal.sqlite" in line and line.endswith("--no-journal runs without it")
    assert not (tmp_path / "o" / "results.jsonl").exists()
    assert not (tmp_path / "o" / "run.json").exists()  # no run began: --out o again is fine


@needs_dev_full
def test_events_file_on_a_full_device_stops_the_run_at_once(tmp_path: Path) -> None:
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "events.jsonl").symlink_to("/dev/full")
    done = asynceval("run", "padded.py", "--out", "o", "--quiet", cwd=tmp_path)
    assert _one_line(done) == _stopped_line("events.jsonl", errno.ENOSPC)
    assert len(_reports(tmp_path / "o" / "results.jsonl")) < N_TASKS


@needs_dev_full
def test_results_file_on_a_full_device_fails_at_its_header_and_resume_starts_over(
    tmp_path: Path,
) -> None:
    """Not even the header fits; the directory can be resumed once results.jsonl has room."""
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    results = tmp_path / "o" / "results.jsonl"
    results.parent.mkdir()
    results.symlink_to("/dev/full")
    done = asynceval("run", "padded.py", "--out", "o", "--quiet", cwd=tmp_path)
    assert _one_line(done) == _stopped_line("results.jsonl", errno.ENOSPC)
    results.unlink()
    results.touch()  # what a refused header leaves on a real disk: an empty file
    _resume_finishes_the_run(tmp_path)


@needs_dev_full
def test_stdout_on_a_full_device_ends_the_display_not_the_run(tmp_path: Path) -> None:
    """`asynceval run ... > file` on a full disk: the run's files are its record, so it goes on."""
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*CLI, "run", "padded.py", "--out", "o"],
            stdout=full, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=60, check=False,
        )  # fmt: skip
    assert _one_line(done) == (
        f"asynceval run: cannot write standard output: [Errno {errno.ENOSPC}] "
        f"{os.strerror(errno.ENOSPC)}; the run went on without it: results in "
        "o/results.jsonl, events in o/events.jsonl"
    )
    assert len(_reports(tmp_path / "o" / "results.jsonl")) == N_TASKS


def test_a_results_line_cut_short_is_skipped_by_report_and_run_again_by_resume(
    tmp_path: Path,
) -> None:
    """A kill (or a crash) mid-line leaves a partial last line: both commands tolerate it."""
    (tmp_path / "padded.py").write_text(PADDED_BENCH)
    assert asynceval("run", "padded.py", "--out", "o", "--quiet", cwd=tmp_path).returncode == 0
    results = tmp_path / "o" / "results.jsonl"
    data = results.read_bytes()
    results.write_bytes(data[: len(data) - 40])  # the last report loses its end
    report = asynceval("report", "o", "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["repetitions"] == N_TASKS - 1 and summary["damaged_lines"] == 1
    done = asynceval("run", "padded.py", "--resume", "o", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records, damaged = read_records(results)
    assert damaged == 1  # the cut line stays, ended, on a line of its own
    successes = Counter(r["task_id"] for r in records if r.get("status") == "success")
    assert len(successes) == N_TASKS and set(successes.values()) == {1}


@needs_dev_full
def test_an_append_only_file_keeps_its_first_error(tmp_path: Path) -> None:
    """Every later write raises the first error again, naming the file; nothing lands."""
    full = tmp_path / "full.jsonl"
    full.symlink_to("/dev/full")
    file = AppendOnlyFile(full)
    with pytest.raises(OSError, match="No space left") as first:
        file.write(b'{"a": 1}\n')
    assert first.value.errno == errno.ENOSPC and first.value.filename == str(full)
    with pytest.raises(OSError, match="No space left") as again:
        file.write(b"\n")
    assert (again.value.errno, again.value.filename) == (errno.ENOSPC, str(full))
    file.close()
    file.close()  # harmless


FINE = """
from asynceval import Benchmark, Task


class Fine(Benchmark):
    def default_tasks(self):
        return [Task(query="q", id="t")]

    async def setup_agents(self, agent_data, environment, task, user):
        return [lambda query: query], {}


class Other:
    pass


NUMBER = 42
"""

BROKEN_CONSTRUCTOR = """
from asynceval import Benchmark


class NeedsKey(Benchmark):
    def __init__(self):
        raise ValueError("NEEDS_KEY is not set")

    async def setup_agents(self, agent_data, environment, task, user):
        return [], {}


benchmark = NeedsKey
"""

BROKEN_TASKS = """
from asynceval import Benchmark


class NoTasks(Benchmark):
    def default_tasks(self):
        return {}["tasks"]

    async def setup_agents(self, agent_data, environment, task, user):
        return [], {}
"""

TARGET_FILES: dict[str, str | bytes] = {
    "fine.py": FINE,
    "syntax.py": "def oops(:\n",
    "raises.py": "x = 1\ny = x / 0\n",
    "multiline.py": 'raise ValueError("line one\\nline two")\n',
    "exits.py": "import sys\n\nsys.exit(3)\n",
    "needs_dep.py": "import no_such_dependency\n",
    "constructor.py": BROKEN_CONSTRUCTOR,
    "tasks_fail.py": BROKEN_TASKS,
    "nothing.py": "x = 1\n",
    "binary.py": b"\x7fELF\x02\x01\x01\x00\xd0\xff\n",
    "latin1.py": 'name = "caf\xe9"\n'.encode("latin-1"),
    "notes.txt": "not Python\n",
}


def _make_targets(tmp_path: Path) -> None:
    for name, content in TARGET_FILES.items():
        if isinstance(content, bytes):
            (tmp_path / name).write_bytes(content)
        else:
            (tmp_path / name).write_text(content)
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo.py")  # reading it would block the import for ever
    (tmp_path / "unreadable.py").write_text(FINE)
    (tmp_path / "unreadable.py").chmod(0)
    (tmp_path / "io_error.py").symlink_to("/proc/self/mem")  # reading offset 0: EIO, even as root


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing.py", "'missing.py': no such file"),
        ("folder.py", "'folder.py': a directory, not a Python file"),
        ("folder", "'folder': a directory, not a Python file; give path/file.py, "),
        ("notes.txt", "'notes.txt': not a Python file (no .py); give path/file.py, "),
        ("fifo.py", "'fifo.py': not a regular file"),
        ("unreadable.py", "'unreadable.py': cannot read it: Permission denied"),
        ("io_error.py", "'io_error.py': cannot read it: Input/output error"),
        ("binary.py", "'binary.py' failed to import: SyntaxError: source code "),
        ("latin1.py", "'latin1.py' failed to import: SyntaxError: (unicode error) 'utf-8' codec"),
        ("syntax.py", "'syntax.py' failed to import: SyntaxError: invalid syntax (syntax.py, line 1)"),
        ("raises.py", "'raises.py' failed to import: ZeroDivisionError: division by zero (at "),
        ("multiline.py", "'multiline.py' failed to import: ValueError: line one; line two (at "),
        ("exits.py", "'exits.py' exited while being imported (SystemExit: 3); put what the file "),
        ("needs_dep.py", "'needs_dep.py' failed to import: ModuleNotFoundError: No module named "),
        ("needs_dep:Thing", "'needs_dep' failed to import: ModuleNotFoundError: No module named "),
        ("no_such_module:Thing", "'no_such_module': no such module (No module named "),
        ("fine.py:Nope", "'fine.py:Nope': fine.py has no attribute 'Nope'"),
        ("fine:Nope", "'fine:Nope': fine has no attribute 'Nope'"),
        ("fine.py:NUMBER", "'fine.py:NUMBER': int is not a Benchmark"),
        ("fine.py:Other", "'fine.py:Other': Other is not a Benchmark subclass"),
        ("json:dumps", "'json:dumps': cannot build it without arguments (dumps() missing 1 "),
        ("constructor.py", "'constructor.py': building it failed: ValueError: NEEDS_KEY is not set (at "),
        ("tasks_fail.py", "tasks_fail.py: default_tasks() failed: KeyError: 'tasks' (at "),
        ("nothing.py", "'nothing.py': cannot tell which Benchmark to run (found: none); "),
    ],
)  # fmt: skip
def test_a_target_that_cannot_be_loaded_is_one_line_and_writes_nothing(
    tmp_path: Path, target: str, message: str
) -> None:
    if target == "unreadable.py" and os.geteuid() == 0:
        pytest.skip("root reads a file without read permission (io_error.py covers reading)")
    if target == "io_error.py" and not Path("/proc/self/mem").exists():
        pytest.skip("needs Linux's /proc/self/mem")
    _make_targets(tmp_path)
    done = asynceval("run", target, "--out", "o", cwd=tmp_path, timeout=20)
    assert _one_line(done).startswith(f"asynceval run: {message}")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("target", "where"),
    [
        ("raises.py", "raises.py:2)"),
        ("multiline.py", "multiline.py:1)"),
        ("needs_dep.py", "needs_dep.py:1)"),
        ("constructor.py", "constructor.py:7)"),
        ("tasks_fail.py", "tasks_fail.py:7)"),
    ],
)
def test_an_exception_in_the_targets_code_names_where_it_was_raised(
    tmp_path: Path, target: str, where: str
) -> None:
    _make_targets(tmp_path)
    done = asynceval("run", target, "--out", "o", cwd=tmp_path)
    assert _one_line(done).endswith(where)


def test_answers_the_disk_refuses_to_the_cache_are_said_after_the_summary(tmp_path: Path) -> None:
    """The cache could be written at the start, then the disk refused its answers (a 100 KB
    file size limit): the run is whole and exits 0, and stderr says how many were not kept."""
    done = asynceval(
        "run", ARITHMETIC, "--cache", "c", "--no-journal", "--out", "o", "--quiet",
        cwd=tmp_path, file_size_limit=100_000,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert re.fullmatch(
        r"asynceval: warning: \d+ answers? could not be kept in the model-call cache \(.*/c\): "
        r"the disk refused them; the run's results are whole",
        line,
    ), line
    assert len(_reports(tmp_path / "o" / "results.jsonl")) == 40
