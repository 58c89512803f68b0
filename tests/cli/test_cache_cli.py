"""`asynceval run --cache DIR` / `--no-cache` / LLM_CACHE_DIR from the command line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .test_cli import ARITHMETIC, asynceval, events_of


def names(run_dir: Path) -> Counter[str]:
    return Counter(str(e["event"]) for e in events_of(run_dir / "events.jsonl"))


def test_a_second_run_with_the_cache_is_answered_from_it(tmp_path: Path) -> None:
    first = asynceval("run", ARITHMETIC, "--out", "a", "--cache", "cache", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert names(tmp_path / "a")["acquired"] == 40 and not names(tmp_path / "a")["cache_hit"]
    second = asynceval("run", ARITHMETIC, "--out", "b", "--cache", "cache", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert names(tmp_path / "b")["cache_hit"] == 40 and not names(tmp_path / "b")["acquired"]
    assert "answered from the cache" in second.stdout and "40 of the LLM calls" in second.stdout
    # the same pass rate (what the calls cost differs: answers from the cache cost nothing)
    line = next(line for line in first.stdout.splitlines() if "pass rate" in line)
    rate = next(part for part in line.split(" | ") if part.startswith("pass rate"))
    assert f"| {rate} |" in second.stdout and "| cost $" in line


def test_no_cache_wins_over_the_environment(tmp_path: Path) -> None:
    env = {"LLM_CACHE_DIR": str(tmp_path / "cache")}
    done = asynceval("run", ARITHMETIC, "--out", "a", "--quiet", cwd=tmp_path, env=env)
    assert done.returncode == 0 and (tmp_path / "cache").is_dir()
    done = asynceval(
        "run", ARITHMETIC, "--out", "b", "--quiet", "--no-cache", cwd=tmp_path, env=env
    )
    assert done.returncode == 0 and names(tmp_path / "b")["acquired"] == 40
    assert not names(tmp_path / "b")["cache_hit"]
    done = asynceval("run", ARITHMETIC, "--out", "c", "--quiet", cwd=tmp_path, env=env)
    assert names(tmp_path / "c")["cache_hit"] == 40


def test_a_cache_path_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file")
    done = asynceval("run", ARITHMETIC, "--cache", "taken", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("asynceval run: --cache taken: cannot be used as a cache folder")
    assert len(done.stderr.strip().splitlines()) == 1
