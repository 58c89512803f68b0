"""--fail-under on `asynceval run` and `asynceval report`: exit status 1 below the rate (or with
nothing scored), 0 at or above it, and the reason on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli import ARITHMETIC, asynceval

# examples/arithmetic.py on the embedded simulator: 33 of its 40 questions pass (the rest ask for
# a rounding the solver does not do), every time.
PASSED, SCORED = 33, 40


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("fail-under")
    done = asynceval("run", ARITHMETIC, "--out", "out", "--quiet", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd / "out"


def test_a_run_below_the_rate_exits_1_and_says_why(tmp_path: Path) -> None:
    done = asynceval("run", ARITHMETIC, "--out", "out", "--fail-under", "0.9", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert f"pass rate {PASSED}/{SCORED} = 82.5% is below --fail-under 90%" in done.stderr
    assert "0 errors, 0 timeouts" in done.stderr
    assert "asynceval results" in done.stdout  # the summary is still printed


def test_a_quiet_run_at_the_rate_exits_0_and_prints_only_where_it_went(tmp_path: Path) -> None:
    done = asynceval(
        "run", ARITHMETIC, "--out", "out", "--quiet", "--fail-under", "82.5%", cwd=tmp_path
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "results: out\n", "")


@pytest.mark.parametrize(
    ("rate", "status"), [("0.825", 0), ("80%", 0), ("0", 0), ("0.83", 1), ("100%", 1)]
)
def test_report_applies_the_rate_to_a_run_directory(run_dir: Path, rate: str, status: int) -> None:
    done = asynceval("report", str(run_dir), "--fail-under", rate, cwd=run_dir)
    assert done.returncode == status, (done.stdout, done.stderr)
    assert ("is below --fail-under" in done.stderr) == (status == 1)


def test_report_json_stays_one_document_whatever_the_verdict(run_dir: Path) -> None:
    for rate, status in (("0.5", 0), ("0.95", 1)):
        done = asynceval("report", str(run_dir), "--json", "--fail-under", rate, cwd=run_dir)
        assert done.returncode == status
        assert json.loads(done.stdout)["scored"] == SCORED


def test_nothing_scored_fails_the_rate(tmp_path: Path) -> None:
    (tmp_path / "unscored.py").write_text(
        "from asynceval import Benchmark, Task\n\n"
        "class Unscored(Benchmark):\n"
        "    def default_tasks(self):\n"
        "        return [Task(query='q', id='a')]\n\n"
        "    def setup_agents(self, agent_data, environment, task, user):\n"
        "        return [lambda query: 'answer'], {}\n"
    )
    done = asynceval("run", "unscored.py", "--quiet", "--fail-under", "0", cwd=tmp_path)
    assert done.returncode == 1
    assert "no repetition was scored" in done.stderr


@pytest.mark.parametrize(
    ("rate", "message"),
    [
        ("80", "'80' is above 1: for a percentage write 80%"),
        ("abc", "'abc' is not a rate"),
        ("150%", "not between 0 and 1"),
        ("-0.1", "not between 0 and 1"),
    ],
)
def test_a_bad_rate_is_a_usage_error(run_dir: Path, rate: str, message: str) -> None:
    done = asynceval("report", str(run_dir), "--fail-under", rate, cwd=run_dir)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


CRASHY = """
import anyio

from asynceval import Benchmark, Task, TaskProtocol
from asynceval.errors import AgentError, UserError


class Crashy(Benchmark):
    def default_tasks(self):
        return [
            Task(query=str(i), id=f"t{i}", protocol=TaskProtocol(timeout_seconds=0.2))
            for i in range(10)
        ]

    def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            if query == "0":
                return "fine"
            if query in ("1", "2"):
                raise RuntimeError("an error nobody owns")  # unknown_execution_error
            if query == "3":
                raise UserError("the simulated user broke")  # user_error
            if query == "4":
                await anyio.sleep(5)  # task_timeout
            raise AgentError("the agent gave up")

        return [agent], {}

    def setup_evaluators(self, environment, task, agents, user):
        return [lambda task, answer, traces: {"passed": True}]
"""


def test_agent_errors_count_as_failures_and_the_rest_is_said(tmp_path: Path) -> None:
    """1 pass, 5 agent errors, 1 user error, 2 errors of no status of their own, 1 timeout: 1/7, not the
    summary's 1/1."""
    (tmp_path / "crashy.py").write_text(CRASHY)
    done = asynceval(
        "run", "crashy.py", "--quiet", "--fail-under", "50%", "--allow-errors", cwd=tmp_path
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "asynceval: pass rate 1/7 = 14.3% (6 agent or user errors counted as failures) is below "
        "--fail-under 50% (not scored: 2 errors, 1 timeouts)"
    )
    (run_dir,) = (tmp_path / "results").iterdir()
    done = asynceval("report", str(run_dir), "--fail-under", "0.1", cwd=tmp_path)
    assert done.returncode == 0
    assert "pass rate 1/7 = 14.3% (6 agent or user errors counted as failures) meets" in done.stdout
