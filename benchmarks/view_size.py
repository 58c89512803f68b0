"""How big and how fast `asynceval view` is for a run of 100,000 repetitions.

Makes the run with the whole engine (results.jsonl and events.jsonl written as `asynceval run`
writes them) against the embedded simulator (calls of 4 +- 3 ms, limit 20, 100 repetitions at
once, so calls queue): each repetition is one LLM call by an
agent that keeps a short conversation as its trace (system prompt of about --trace-chars
characters, question, answer), an exact-match evaluator (the simulator answers "x + x"
exactly, and one question in ten asks for a wrong sum, so about 10% fail), and 2% of attempts
answered 503 (retries). Then it builds the page (time, HTML size, peak RSS of the build in a
fresh process) and loads it in headless chromium: the page writes `performance.now()` at the
end of its first render into `data-rendered-ms` (time since navigation start: HTML parse,
JSON parse, first render), for the plain page, a sort of all rows, a search, and a row opened.

    python benchmarks/view_size.py                       # 100,000 repetitions (about 2 minutes)
    python benchmarks/view_size.py -n 10000 --keep /tmp/v  # smaller; keep the run and the page
    python benchmarks/view_size.py --reuse /tmp/v         # measure an existing run directory
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from asynceval import Benchmark, OpenAIChatModel, Settings, Task, configure_logging
from asynceval.analysis.view import write_view
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

SYSTEM = "You are a careful calculator. Answer with the number only. "


class Chatty(Benchmark):
    """One LLM call per repetition by an agent whose trace is its conversation."""

    def __init__(self, model: OpenAIChatModel, trace_chars: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model, self.system = model, (SYSTEM * (trace_chars // len(SYSTEM) + 1))[:trace_chars]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model, system = self.model, self.system

        class Agent:
            def __init__(self) -> None:
                self.messages: list[dict[str, str]] = [{"role": "system", "content": system}]

            async def __call__(self, query: str) -> str:
                self.messages.append({"role": "user", "content": query})
                answer = (await model.generate(self.messages, agent="solver")).text
                self.messages.append({"role": "assistant", "content": answer})
                return answer

            def gather_traces(self) -> dict[str, Any]:
                return {"messages": self.messages}

        agent = Agent()
        return [agent], {"solver": agent}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Any, user: Any
    ) -> Any:
        def exact(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            expected = task.evaluation_data["expected"]
            return {"passed": str(answer).strip() == expected, "expected": expected}

        return [exact]


def tasks(n: int) -> Iterator[Task]:
    for index in range(n):
        wrong = index % 10 == 9  # expects a wrong sum: fails
        expected = str(2 * index + (1 if wrong else 0))
        yield Task(
            query=f"What is {index} + {index}?",
            id=f"q{index}",
            evaluation_data={"expected": expected},
        )


async def make_run(n: int, out: Path, trace_chars: int) -> None:
    """The run, in this (fresh) process: its peak RSS is not the build's. Limit 20, calls of
    4 ms +- 3 ms, 100 repetitions at once: the limit is reached and calls queue."""
    settings = Settings(
        log_file=str(out / "events.jsonl"),
        max_concurrent_llm_calls=20,
        retry_initial_delay=0.001,
        retry_max_delay=0.01,
    )
    configure_logging(settings)
    sim = SimConfig(latency=0.004, latency_jitter=0.003, fault_rates={503: 0.02}, retry_after=0.0)
    controller = ConcurrencyController(20)
    async with OpenAIChatModel(controller=controller, sim_config=sim, settings=settings) as model:
        bench = Chatty(model, trace_chars, max_concurrent_tasks=100, settings=settings)
        await bench.run(tasks(n), results_path=out / "results.jsonl", collect=False)


def build(run_dir: Path, page: Path) -> None:
    """Build the page in this (fresh) process; print its size, build time and peak RSS."""
    size, seconds = write_view([run_dir], page)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{size} {seconds:.3f} {rss:.0f}")


def _chromium(chromium: str, profile: Path, *args: str) -> tuple[str, float]:
    """(stdout, wall seconds) of one headless chromium run."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done.stdout, time.perf_counter() - started


def rendered_ms(chromium: str, page: Path, fragment: str, profile: Path) -> int:
    """The page's own time from navigation start to the end of its first render, in ms."""
    dom, _ = _chromium(chromium, profile, "--dump-dom", page.as_uri() + fragment)
    found = re.search(r'data-rendered-ms="(\d+)"', dom)
    if not found:
        raise RuntimeError(f"the page did not render ({fragment})")
    return int(found.group(1))


def screenshot_s(chromium: str, page: Path, profile: Path, png: Path) -> float:
    """Wall seconds for chromium to start, load the page and paint it into a PNG (--dump-dom's
    wall would mostly be the serializing of the page's embedded data)."""
    _, wall = _chromium(
        chromium, profile, f"--screenshot={png}", "--window-size=1400,1000", page.as_uri()
    )
    return wall


def measure(run_dir: Path, keep: bool) -> None:
    results, events = run_dir / "results.jsonl", run_dir / "events.jsonl"
    print(f"results.jsonl {results.stat().st_size / 1e6:.1f} MB, events.jsonl ", end="")
    print(f"{events.stat().st_size / 1e6:.1f} MB" if events.exists() else "missing")
    page = run_dir / "view.html"
    done = subprocess.run(
        [sys.executable, __file__, "--build-child", str(run_dir), str(page)],
        capture_output=True,
        text=True,
        check=True,
    )
    size, seconds, rss = done.stdout.split()
    print(f"view.html {int(size) / 1e6:.1f} MB, built in {float(seconds):.2f} s, peak RSS {rss} MB")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium on PATH: load times not measured")
        return
    with tempfile.TemporaryDirectory() as scratch:
        profile, png = Path(scratch) / "profile", Path(scratch) / "shot.png"
        blank = Path(scratch) / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p>")
        screenshot_s(chromium, page, profile, png)  # warms the disk cache and the profile
        base, wall = (
            screenshot_s(chromium, blank, profile, png),
            screenshot_s(chromium, page, profile, png),
        )
        print(f"  chromium start, load, paint: {wall:.2f} s (a blank page: {base:.2f} s)")
        for label, fragment in [
            ("load and first render", ""),
            ("... sorted by duration, longest first", "#sort=-duration_s"),
            ("... searched for 'q9999'", "#q=q9999"),
            ("... outcome=failed", "#outcome=failed"),
            ("... the last row opened", "#sort=-line&row=" + str(_rows(results) - 1)),
        ]:
            rendered = rendered_ms(chromium, page, fragment, profile)
            print(f"  {label:<40} {rendered:>6} ms from navigation start (the page's clock)")
    if keep:
        print(f"page: {page}")


def _rows(results: Path) -> int:
    with open(results, "rb") as file:
        return sum(1 for line in file if not line.startswith(b'{"type": "header"'))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="repetitions")
    parser.add_argument("--trace-chars", type=int, default=200, help="system prompt length")
    parser.add_argument("--keep", type=Path, help="make the run in this directory and keep it")
    parser.add_argument("--reuse", type=Path, help="measure this run directory, make none")
    parser.add_argument("--run-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--build-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_child:
        n, out, chars = args.run_child
        anyio.run(make_run, int(n), Path(out), int(chars))
        return
    if args.build_child:
        build(Path(args.build_child[0]), Path(args.build_child[1]))
        return
    if args.reuse:
        measure(args.reuse, keep=True)
        return
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = args.keep or Path(scratch)
        run_dir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        child = [sys.executable, __file__, "--run-child", str(args.n), str(run_dir)]
        subprocess.run([*child, str(args.trace_chars)], check=True)
        print(f"{args.n} repetitions run in {time.perf_counter() - started:.1f} s")
        measure(run_dir, keep=args.keep is not None)


if __name__ == "__main__":
    main()
