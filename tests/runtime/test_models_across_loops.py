"""Models are stateless codecs: one model object serves any number of event loops, in turn or at
once, and after `aclose()`, and nothing is left unclosed at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).parents[2]
WARNINGS = ("Unclosed", "unclosed", "ResourceWarning", "Task was destroyed", "Traceback")


def _run_script(body: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"), **env},
    )


def _assert_clean(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    found = [word for word in WARNINGS if word in done.stderr]
    assert not found, done.stderr


def test_one_model_in_three_loops_in_turn_two_at_once_and_after_aclose(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """Three `anyio.run`s in turn, two loops at once in threads, then `aclose()` and one more
    call: every call answers, and exit shows no unclosed session, socket or task."""
    base_url = sim_server("--latency", "0.01")
    body = f"""
    import threading
    import anyio
    from asynceval import OpenAIChatModel

    model = OpenAIChatModel("sim", base_url={base_url!r})
    answers = []

    async def calls(n):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(lambda i=i: _one(i))

    async def _one(i):
        answers.append((await model.generate(f"What is {{i}} + 3?")).text)

    for _ in range(3):
        anyio.run(calls, 10)
    threads = [threading.Thread(target=anyio.run, args=(calls, 10)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    async def closed_then_used():
        await model.aclose()
        await _one(99)
        async with model:
            await _one(98)
        await _one(97)  # still works after `async with` closed it

    anyio.run(closed_then_used)
    assert len(answers) == 53, len(answers)
    print("ok", len(answers))
    """
    done = _run_script(body, tmp_path, {"LOG_FILE": str(tmp_path / "events.jsonl")})
    _assert_clean(done)
    assert done.stdout.strip() == "ok 53"


def test_three_run_syncs_in_one_script_leave_nothing_unclosed(
    sim_server: Callable[..., str], tmp_path: Path
) -> None:
    """A notebook's life: three `run_sync` calls with one model, over real HTTP; clean exit."""
    base_url = sim_server("--latency", "0.01")
    body = f"""
    from asynceval import Benchmark, OpenAIChatModel, Task

    model = OpenAIChatModel("sim", base_url={base_url!r})

    class OneCall(Benchmark):
        async def setup_agents(self, agent_data, environment, task, user):
            async def agent(query):
                return (await model.generate(query)).text

            return [agent], {{}}

    for run in range(3):
        reports = OneCall().run_sync([Task(query=f"What is {{i}} * 2?") for i in range(5)])
        assert [r["status"] for r in reports] == ["success"] * 5
    print("ok")
    """
    done = _run_script(body, tmp_path, {"LOG_FILE": str(tmp_path / "events.jsonl")})
    _assert_clean(done)
    assert done.stdout.strip() == "ok"
