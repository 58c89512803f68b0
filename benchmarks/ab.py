"""Before and after in one run: a benchmark script on two versions of asynceval, round by round.

    python benchmarks/ab.py --base 5d273d6 --rounds 3 engine.py --sizes 10000 --rounds 1 \\
        --skip-loopback --rss --rss-uncollected
    python benchmarks/ab.py --base 5d273d6 --rounds 3 call_path.py --rounds 1
    python benchmarks/ab.py --base 5d273d6 --after HEAD --rounds 5 engine.py --sizes 10000 \\
        --rounds 1 --latency 0.001 --skip-loopback --rss --rss-uncollected --log-file-apart

The base commit is checked out into a temporary git worktree; the script (this tree's copy, run
from benchmarks/, so both versions face the same workload) then runs once per round with the
base's source first on the path, then with this tree's, alternating, so that both see the
machine as it is at that moment. `--after REF` compares with that commit (checked out the
same way) instead of this working tree, so that edits in progress do not count. For
`engine.py` and `call_path.py` the figures that matter are picked out of each round's output
and printed as medians side by side with after/before; other scripts' output is printed as it
came.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent

FIGURES: dict[str, list[tuple[str, str]]] = {
    "engine.py": [
        ("engine/bare, in process", r"engine/bare (\d+\.\d+)  engine CPU"),
        ("engine CPU per repetition, in process (us)", r"engine \d+\.\d+ \((\d+) us CPU/rep\)"),
        ("engine CPU per repetition less the bare loop's (us)", r"engine CPU - bare (-?\d+) us"),
        ("engine CPU per repetition at 0 ms (us)", r"repetitions/s \((\d+) us CPU\)"),
        ("engine repetitions/s at 0 ms", r"engine (\d+) repetitions/s"),
        ("bare calls/s at 0 ms", r"bare (\d+) calls/s"),
        ("peak RSS, collect=False (MB)", r"collect=False \(in-process sim, 0 ms\): (\d+\.\d+) MB"),
    ],
    "call_path.py": [
        ("full path CPU per call, 50 workers (us)", r"full path, 50 workers\s+(\d+\.\d+) us"),
        ("full path CPU per call, all at once (us)", r"all started at once\s+(\d+\.\d+) us"),
        ("bare httpx CPU per call (us)", r"bare httpx, 50 workers\s+(\d+\.\d+) us"),
        ("loopback asynceval / best bare, 50 workers", r"best bare: 50 workers (\d+\.\d+)"),
        ("loopback asynceval aiohttp efficiency", r"asynceval aiohttp, 50 workers\s+(\d+\.\d+)"),
    ],
}


def worktree(ref: str, where: Path) -> Path:
    """`ref` checked out at `where` (detached), for its `src/` to be imported."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(where), ref],
        check=True,
        capture_output=True,
    )
    return where


def run(script: str, args: list[str], src: Path) -> str:
    """One run of `script` with the asynceval of `src` first on the path; its output."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{HERE}"}
    done = subprocess.run(
        [sys.executable, str(HERE / script), *args],
        env=env,
        cwd=HERE,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def figures(script: str, output: str) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for label, pattern in FIGURES.get(script, []):
        found[label] = [float(value) for value in re.findall(pattern, output)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the git ref to compare with (before)")
    parser.add_argument(
        "--after", help="a git ref to measure instead of this working tree (e.g. HEAD)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternations of before and after")
    parser.add_argument("script", help="a script in benchmarks/, e.g. engine.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    args = parser.parse_args()
    base_rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.base],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    head_rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.after or "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="asynceval-ab-") as tmp:
        trees = [worktree(args.base, Path(tmp) / "before")]
        if args.after:
            trees.append(worktree(args.after, Path(tmp) / "after"))
        try:
            sources = {
                f"before ({base_rev})": trees[0] / "src",
                f"after ({head_rev}{'' if args.after else '+work tree'})": (
                    trees[1] / "src" if args.after else ROOT / "src"
                ),
            }
            seen: dict[str, dict[str, list[float]]] = {name: {} for name in sources}
            for round_no in range(1, args.rounds + 1):
                for name, src in sources.items():
                    output = run(args.script, args.args, src)
                    print(f"--- round {round_no}, {name}:\n{output}", flush=True)
                    for label, values in figures(args.script, output).items():
                        seen[name].setdefault(label, []).extend(values)
        finally:
            for tree in trees:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )
    before, after = seen.values()
    if not any(before.values()):
        return
    print(f"medians over {args.rounds} alternations ({args.script} {' '.join(args.args)}):")
    print(f"  {'figure':<52} {'before':>9} {'after':>9} {'after/before':>13}")
    for label, values in before.items():
        if not values or not after.get(label):
            continue
        b, a = statistics.median(values), statistics.median(after[label])
        ratio = f"{a / b:.3f}" if b else "-"
        print(f"  {label:<52} {b:>9.3f} {a:>9.3f} {ratio:>13}")


if __name__ == "__main__":
    main()
