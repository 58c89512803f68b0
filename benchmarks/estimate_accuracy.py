"""How close `asynceval estimate` comes to the real run, on the examples (simulated provider).

For each case, the estimate (`asynceval estimate ... --json`, one per seed) and the real run
(`asynceval run ... --out DIR`, same options) are made in subprocesses; the real run's calls,
tokens and cost come from `asynceval report --json`, its wall time from `run_finished`'s
`duration_s` in its events file (what the estimate projects). Printed per case and quantity: the
real value, the estimate's median relative error over the seeds, its worst, and how many of the
95% intervals held the real value.

    python benchmarks/estimate_accuracy.py [--seeds 5] [--case NAME ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "asynceval"]
CASES: dict[str, list[str]] = {
    "arithmetic": ["examples/arithmetic.py"],
    "arithmetic x5": ["examples/arithmetic.py", "--repeats", "5"],
    "arithmetic x10, 2 calls": [
        "examples/arithmetic.py", "--repeats", "10", "--max-concurrent-llm-calls", "2",
    ],
    "multi_turn": ["examples/multi_turn.py"],
    "multi_turn x10": ["examples/multi_turn.py", "--repeats", "10"],
    "judge_panel": ["examples/judge_panel.py"],
    "judge_panel x40": ["examples/judge_panel.py", "--repeats", "40"],
}  # fmt: skip
QUANTITIES = ("llm_calls", "prompt_tokens", "completion_tokens", "cost_usd", "wall_time_s")


def _cli(*args: str, cwd: Path) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, check=False)
    if done.returncode not in (0, 1):  # 1: a run whose repetitions timed out on purpose
        raise RuntimeError(f"asynceval {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def real_run(options: list[str], work: Path) -> dict[str, float | None]:
    """The real run's totals and its wall time."""
    out = work / "real"
    _cli("run", *options, "--out", str(out), "--quiet", "--allow-errors", cwd=ROOT)
    report = json.loads(_cli("report", str(out / "results.jsonl"), "--json", cwd=ROOT))
    finished = [
        json.loads(line)
        for line in (out / "events.jsonl").read_text().splitlines()
        if '"run_finished"' in line
    ]
    return {
        "llm_calls": report.get("llm_calls"),
        "prompt_tokens": report.get("prompt_tokens"),
        "completion_tokens": report.get("completion_tokens"),
        "cost_usd": report.get("cost_usd"),
        "wall_time_s": finished[-1]["duration_s"],
    }


def estimate(options: list[str], seed: int) -> dict[str, Any]:
    """One estimate, its sample's run directory in a temporary folder (not results/)."""
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "sample")
        found = _cli("estimate", *options, "--seed", str(seed), "--out", out, "--json", cwd=ROOT)
    return dict(json.loads(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    args = parser.parse_args()
    for name in args.case or CASES:
        options = CASES[name]
        with tempfile.TemporaryDirectory() as folder:
            real = real_run(options, Path(folder))
        made = [estimate(options, seed) for seed in range(1, args.seeds + 1)]
        print(f"{name}: {made[0]['repetitions']} repetitions, sample {made[0]['sample']}")
        for quantity in QUANTITIES:
            _line(quantity, real.get(quantity), [m.get(quantity) for m in made])


def _line(quantity: str, truth: float | None, found: list[dict[str, float] | None]) -> None:
    """One quantity's accuracy: the real value, the estimates, their errors, the intervals that
    held it (up to float rounding: a collapsed interval is a sum computed another way)."""
    points = [p for p in found if p is not None]
    if truth is None or len(points) < len(found):
        print(f"  {quantity:18} real {truth!s:>12}  (not estimated)")
        return
    errors = [abs(p["estimate"] - truth) / truth if truth else 0.0 for p in points]
    slack = 1e-9 * abs(truth)
    held = sum(p["low"] - slack <= truth <= p["high"] + slack for p in points)
    print(
        f"  {quantity:18} real {truth:12.6g}  estimates "
        f"{', '.join(format(p['estimate'], '.4g') for p in points)}  error median "
        f"{statistics.median(errors):6.1%} worst {max(errors):6.1%}  in interval "
        f"{held}/{len(points)}"
    )


if __name__ == "__main__":
    main()
