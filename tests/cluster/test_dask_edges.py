"""`asynceval run --dask` from a terminal: an address Dask cannot use, and Ctrl-C on a local
cluster (SIGINT to the whole process group, as a terminal sends it), each one line on stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CLI = [sys.executable, "-m", "asynceval"]
ARITHMETIC = str(Path(__file__).parents[2] / "examples" / "arithmetic.py")

SLEEPY = """
import anyio

from asynceval import Benchmark, Task


class Sleepy(Benchmark):
    def default_tasks(self):
        return [Task(query=str(i), id=f"s{i}") for i in range(400)]

    async def setup_agents(self, agent_data, environment, task, user):
        async def agent(query):
            await anyio.sleep(0.3)
            return query

        return [agent], {}
"""


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("garbage://x", "unknown address scheme 'garbage'"),
        ("tcp://", "missing port number"),
        ("tcp://host:port", "invalid literal for int()"),
    ],
)
def test_an_address_dask_cannot_use_is_one_line(tmp_path: Path, spec: str, reason: str) -> None:
    done = subprocess.run(
        [*CLI, "run", ARITHMETIC, "--dask", spec, "--quiet", "--out", "o"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"asynceval run: {spec!r} is not a Dask scheduler address Dask can use ({reason}"
    ), lines[0]
    assert lines[0].endswith("give a scheduler address such as tcp://host:8786")


def test_ctrl_c_on_a_local_cluster_run_is_one_line(tmp_path: Path) -> None:
    """The terminal's SIGINT reaches the run and its worker processes alike: the run answers it
    (130, the resume hint), the workers neither print a KeyboardInterrupt each nor log the
    scheduler's going."""
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    run = subprocess.Popen(
        [*CLI, "run", "sleepy.py", "--dask", "local:2", "--quiet", "--out", "o"],
        cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        start_new_session=True,  # its own process group, signalled as a terminal does
    )  # fmt: skip
    results = tmp_path / "o" / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and run.poll() is None:
        if results.exists() and len(results.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted: "), stderr
    assert "--resume o" in lines[0]


def test_a_local_cluster_run_of_400_llm_repetitions_finishes(tmp_path: Path) -> None:
    """The end of each repetition once cancelled the tasks Dask's own semaphore had started in
    it: a run of more than ~120 repetitions with LLM calls then stalled for good."""
    done = subprocess.run(
        [*CLI, "run", ARITHMETIC, "--dask", "local:2", "--repeats", "10", "--out", "o", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = (tmp_path / "o" / "results.jsonl").read_text().splitlines()
    assert sum('"status": "success"' in line for line in lines) == 400
