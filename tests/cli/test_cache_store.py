"""`asynceval cache stats` / `cache prune` on the cache a run filled, one-line errors for folders
that cannot be read, and output cut short by its reader (`| head`) ending quietly."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .test_cli import ARITHMETIC, CLI, asynceval


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where `asynceval run` left a cache of 40 answers (and the run's directory)."""
    where = tmp_path_factory.mktemp("filled")
    done = asynceval("run", ARITHMETIC, "--out", "run", "--cache", "cache", "--quiet", cwd=where)
    assert done.returncode == 0, done.stderr
    return where


def test_stats_says_what_the_cache_holds(filled: Path) -> None:
    done = asynceval("cache", "stats", "cache", "--json", cwd=filled)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["entries"] == 40 and 0 < stats["bytes"] <= stats["disk_bytes"]
    assert stats["oldest"] <= stats["newest"] and stats["old_format_files"] == 0
    text = asynceval("cache", "stats", cwd=filled, env={"LLM_CACHE_DIR": str(filled / "cache")})
    assert text.returncode == 0 and "entries        40" in text.stdout


def test_prune_bounds_the_cache_then_empties_it(tmp_path: Path, filled: Path) -> None:
    cache = tmp_path / "cache"
    subprocess.run(["cp", "-r", str(filled / "cache"), str(cache)], check=True)
    total = json.loads(asynceval("cache", "stats", str(cache), "--json", cwd=tmp_path).stdout)
    half = total["bytes"] // 2
    done = asynceval("cache", "prune", str(cache), "--max-bytes", str(half), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    after = json.loads(asynceval("cache", "stats", str(cache), "--json", cwd=tmp_path).stdout)
    assert 0 < after["entries"] < 40 and after["bytes"] <= half
    done = asynceval("cache", "prune", str(cache), "--older-than", "1", cwd=tmp_path)
    assert done.returncode == 0 and "deleted 0 entries" in done.stdout  # all used today
    done = asynceval("cache", "prune", str(cache), "--all", cwd=tmp_path)
    assert done.returncode == 0 and "0 left" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cache", "stats", "nowhere"], "asynceval cache: nowhere: no such folder"),
        (["cache", "prune", "afile", "--all"], "asynceval cache: afile: not a folder"),
        (["cache", "stats"], "asynceval cache: no cache folder: give DIR or set LLM_CACHE_DIR"),
        (["cache", "prune", "."], "asynceval cache: say what to prune"),
        (["cache", "stats", "broken"], "asynceval cache: "),
    ],
)
def test_a_folder_that_cannot_be_read_is_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "cache.sqlite").write_text("not a database" * 200)
    done = asynceval(*args, cwd=tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.startswith(message) and len(done.stderr.strip().splitlines()) == 1


def test_output_cut_short_by_its_reader_ends_quietly(filled: Path) -> None:
    """`asynceval logs check RUN | head -0`: no traceback, and 141 (SIGPIPE's status in a
    shell), not 1, which would say the limit was not held."""
    child = subprocess.Popen(
        [*CLI, "logs", "check", "run"],
        cwd=filled,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before a line is written
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141
    assert stderr == ""
