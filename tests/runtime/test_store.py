"""The store under the model-call cache and the call journal: one SQLite file that survives a
kill -9 in the middle of stores with nothing left behind, is shared by processes, bounds itself
by LLM_CACHE_MAX_BYTES evicting the least recently used, keeps disk use near the data's size,
and says at once when it cannot be written."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from asynceval import Runtime, Settings
from asynceval.runtime import CachedAnswer, CallCache, Store

WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from asynceval.runtime import Store

    store = Store(sys.argv[1])
    start, step = int(sys.argv[2]), int(sys.argv[3])
    for i in range(start, 10**9, step):
        key = hashlib.sha256(str(i).encode()).digest()
        body = (b'{"n": %d, "pad": "' % i) + b"x" * (i % 5000) + b'"}'
        store.put(key, "http://h/v1/chat/completions", 200, "application/json", body)
        if i % 50 == 0:
            store.flush()
            print(i, flush=True)
    """
)


def writer(tmp_path: Path, path: Path, start: int = 0, step: int = 1) -> subprocess.Popen[str]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    return subprocess.Popen(
        [sys.executable, str(script), str(path), str(start), str(step)],
        stdout=subprocess.PIPE,
        text=True,
    )


def check_whole(path: Path) -> int:
    """Every entry of the store at `path` reads back whole; their number."""
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        keys = [key for (key,) in db.execute("SELECT key FROM entries")]
    store = Store(path)
    assert all(store.get(key) is not None for key in keys)
    store.close()
    return len(keys)


def test_a_kill_9_in_the_middle_of_stores_leaves_a_whole_store_and_no_stray_files(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache" / "cache.sqlite"
    child = writer(tmp_path, path)
    assert child.stdout is not None
    for _ in range(8):  # well into its stores, then killed in the middle of one
        child.stdout.readline()
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert check_whole(path) >= 351  # all it had flushed when it said 350, at least
    Store(path).put(b"k" * 32, "http://h/v1", 200, "application/json", b"{}").result()
    names = {p.name for p in path.parent.iterdir()}
    assert names <= {"cache.sqlite", "cache.sqlite-wal", "cache.sqlite-shm"}, names


def test_processes_storing_at_once_into_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    children = [writer(tmp_path, path, start, 3) for start in range(3)]
    seen = []
    for child in children:
        assert child.stdout is not None
        for _ in range(4):
            seen.append(int(child.stdout.readline()))
    for child in children:
        child.send_signal(signal.SIGKILL)
        child.wait()
    check_whole(path)
    store = Store(path)
    import hashlib

    for i in seen:  # every store a writer had flushed is there
        assert store.get(hashlib.sha256(str(i).encode()).digest()) is not None


def test_the_bound_evicts_the_least_recently_used(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache.sqlite", max_bytes=10_000)
    body = b"x" * 1000
    for i in range(8):
        store.put(bytes([i]) * 32, "u", 200, "text/plain", body).result()
        time.sleep(0.002)
    assert store.get(bytes([0]) * 32) is not None  # the oldest, used again now
    time.sleep(0.002)
    for i in range(8, 12):
        store.put(bytes([i]) * 32, "u", 200, "text/plain", body).result()
        time.sleep(0.002)
    stats = store.stats()
    assert stats.bytes <= 10_000
    kept = {i for i in range(12) if store.get(bytes([i]) * 32) is not None}
    assert 0 in kept and 1 not in kept and {9, 10, 11} <= kept


def test_a_damaged_entry_is_a_miss_and_the_next_store_replaces_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache.sqlite")
    key = b"d" * 32
    store.put(key, "u", 200, "application/json", b'{"a": 1}').result()
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE entries SET body = X'7B22613A'")  # same length, other bytes
    assert store.get(key) is None
    store.put(key, "u", 200, "application/json", b'{"a": 2}').result()
    entry = store.get(key)
    assert entry is not None and entry.content == b'{"a": 2}'
    assert store.stats().entries == 1


def test_disk_use_stays_within_one_and_a_half_times_the_data(tmp_path: Path) -> None:
    """10,000 answers of the size a chat completion has (600-800 bytes), the old format took
    about six times their size."""
    store = Store(tmp_path / "cache.sqlite")
    for i in range(10_000):
        body = b'{"id": "chatcmpl-%08d", "choices": [' % i + b"y" * (560 + i % 200) + b"]}"
        store.put(os.urandom(32), "http://127.0.0.1:8000/v1/chat/completions", 200, "a/j", body)
    store.flush()
    store.close()  # SQLite folds its -wal file into the store
    stats = store.stats()
    assert stats.entries == 10_000
    assert stats.disk_bytes <= 1.5 * stats.bytes, (stats.disk_bytes, stats.bytes)


def test_a_store_that_cannot_be_written_is_said_at_start_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the folder should be")
    cache = CallCache(tmp_path / "taken" / "cache")
    with pytest.raises(OSError, match="taken") as caught:
        cache.check()
    assert "\n" not in str(caught.value)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "cache.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(OSError, match="broken"):
        CallCache(tmp_path / "broken").check()
    CallCache(tmp_path / "fine").check()  # made, writable


async def test_store_failures_during_a_run_stay_counted(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    (cache_dir / "cache.sqlite").mkdir(parents=True)  # in the way of every store
    async with Runtime(Settings(llm_cache_dir=str(cache_dir))) as runtime:
        from asynceval import OpenAIChatModel

        model = OpenAIChatModel()
        for i in range(3):
            await model.generate(f"What is {i} + 1?")
        assert runtime.cache is not None and runtime.cache.store_failures == 3


def test_an_old_one_file_per_entry_folder_is_left_alone_until_pruned(tmp_path: Path) -> None:
    old = tmp_path / "ab"
    old.mkdir()
    (old / ("ab" + "0" * 62)).write_bytes(b'{"format": 1}\n{}')
    (old / ".x1y2.tmp").write_bytes(b"orphan")
    (tmp_path / "notes.txt").write_text("mine")
    cache = CallCache(tmp_path)
    assert len(cache.old_entries()) == 2
    cache.db.put(b"n" * 32, "u", 200, "application/json", b"{}").result()
    assert cache.stats().entries == 1  # the old entries are not read
    removed, _ = cache.prune(everything=True)
    assert removed == 3 and not old.exists() and (tmp_path / "notes.txt").exists()


def test_a_second_identical_run_is_served_across_processes_sharing_the_folder(
    tmp_path: Path,
) -> None:
    """Answers stored by one process are served to the next from the same file."""
    script = textwrap.dedent(
        """
        import sys, anyio
        from asynceval import OpenAIChatModel, Runtime, Settings
        from asynceval.funnel import track_usage

        async def main():
            async with Runtime(Settings(llm_cache_dir=sys.argv[1])):
                with track_usage() as usage:
                    for i in range(5):
                        await OpenAIChatModel().generate(f"What is {i} + 2?")
            print(usage.cache_hits)

        anyio.run(main)
        """
    )
    (tmp_path / "child.py").write_text(script)
    runs = [
        subprocess.run(
            [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "cache")],
            capture_output=True,
            text=True,
            env={**os.environ, "LOG_LEVEL": "ERROR"},
            check=True,
        ).stdout.strip()
        for _ in range(2)
    ]
    assert runs == ["0", "5"]
    assert CallCache(tmp_path / "cache").stats().hits == 5
    assert CachedAnswer  # the public shape of an answer stays importable


async def test_a_transaction_settles_its_waiters_with_one_wake_up_of_their_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers written together wake the event loop waiting for them once, not once each, and
    a store without a bound looks nothing up per entry (no running total)."""
    import asyncio

    loop = asyncio.get_running_loop()
    wake_ups = 0
    threadsafe = loop.call_soon_threadsafe

    def counted(*args: Any) -> Any:
        nonlocal wake_ups
        wake_ups += 1
        return threadsafe(*args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    store = Store(tmp_path / "journal.sqlite")
    committed: list[tuple[int, OSError | None]] = []
    store.on_commit = lambda count, error: committed.append((count, error))
    store.check()
    store._flushing = True  # hold the writer back: the 50 go in one transaction
    futures = [
        store.put_async(bytes([i]) * 32, "u", 200, "a/j", b'{"i": %d}' % i) for i in range(50)
    ]
    store._flushing = False
    store.put_nowait(b"z" * 32, "u", 200, "a/j", b"{}")  # wakes the writer
    for future in futures:
        await future
    assert wake_ups == 1 and committed == [(51, None)]
    assert store.stats().entries == 51 and store.stats().bytes == sum(
        len(b'{"i": %d}' % i) for i in range(50)
    ) + len(b"{}")
    store.close()
    assert store._writer is None


def test_a_bounded_store_counts_what_an_unbounded_one_wrote_into_the_file(tmp_path: Path) -> None:
    """An unbounded store keeps no running total; a bounded one sharing the file counts again
    from the table, so its bound still holds."""
    path = tmp_path / "cache.sqlite"
    unbounded, bounded = Store(path), Store(path, max_bytes=10_000)
    bounded.put(b"a" * 32, "u", 200, "text/plain", b"x" * 1000).result()
    for i in range(8):
        unbounded.put(bytes([i]) * 32, "u", 200, "text/plain", b"x" * 1000).result()
    for i in range(8, 12):
        bounded.put(bytes([i]) * 32, "u", 200, "text/plain", b"x" * 1000).result()
    assert bounded.stats().bytes <= 10_000
    unbounded.close()
    bounded.close()


def _chat_body(i: int) -> bytes:
    return b'{"id": "chatcmpl-%08d", "choices": [' % i + b"y" * (360 + i % 200) + b"]}"


def test_the_bound_holds_the_bytes_on_disk_file_and_log(tmp_path: Path) -> None:
    """LLM_CACHE_MAX_BYTES=2000000 with 5,000 answers left 3.13 MB on disk (the bound counted
    the answers' bytes only, not SQLite's rows, index, pages and log)."""
    bound = 2_000_000
    store = Store(tmp_path / "cache.sqlite", max_bytes=bound)
    settled = []
    for i in range(5_000):
        store.put(
            os.urandom(32), "http://127.0.0.1:8000/v1/chat/completions", 200, "a/j", _chat_body(i)
        )
        if i % 50 == 49:
            store.flush()  # a group of writes committed: the store as it rests
            settled.append(store.disk_bytes())
    store.close()
    stats = store.stats()
    assert max(settled) <= 1.1 * bound, max(settled)
    assert 0.75 * bound <= stats.disk_bytes <= 1.1 * bound, stats.disk_bytes
    # The most recently stored answers are the ones kept.
    assert stats.entries > 1_500 and stats.bytes < bound


def test_prune_to_a_size_bounds_the_bytes_on_disk(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache.sqlite")
    for i in range(6_000):
        store.put(
            os.urandom(32), "http://127.0.0.1:8000/v1/chat/completions", 200, "a/j", _chat_body(i)
        )
    store.flush()
    assert store.disk_bytes() > 3_000_000
    store.prune(max_bytes=1_500_000)
    store.close()
    assert 0.75 * 1_500_000 <= store.disk_bytes() <= 1.1 * 1_500_000, store.disk_bytes()
