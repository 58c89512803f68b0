"""SeenIds: a run's started task ids, compact, exact for repeats across its merges."""

from __future__ import annotations

from asynceval.engine.seen_ids import SeenIds


def test_new_ids_are_added_and_repeats_are_caught_before_and_after_merges() -> None:
    seen = SeenIds()
    ids = [f"task-{i}" for i in range(30_000)]  # several merges of the recent set
    assert all(seen.add(task_id) for task_id in ids)
    assert len(seen) == 30_000
    assert not any(seen.add(task_id) for task_id in ids[::997])  # old (merged) and recent ones
    assert "task-0" in seen and "task-29999" in seen and "task-30000" not in seen
    assert 7 not in seen  # not an id
    assert seen.add("") and not seen.add("")
    assert seen.add("naïve \ud800") and not seen.add(
        "naïve \ud800"
    )  # any str, even a lone surrogate
    assert len(seen) == 30_002


def test_it_stays_small() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        seen = SeenIds()
        for i in range(100_000):
            seen.add(f"w1-{i}")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 2_000_000, grown  # a set of the strings holds about 10 MB
