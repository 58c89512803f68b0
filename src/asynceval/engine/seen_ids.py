"""SeenIds: the task ids a run has started, kept in about 8 bytes each.

A run refuses a task id it has already seen. A set of the ids themselves costs about 100 bytes
per task (the string and the set's slot), 100 MB at a million tasks from a generator; this keeps a
64-bit hash of each id instead: the recent ones in a small set, the rest in one sorted array, merged
as the recent ones grow to an eighth of the array (so merging costs O(n log n) in all). Two
distinct ids share a hash with probability about n^2 / 2^65 (3e-8 at a million), which would make
the second one be refused as a repeat.
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from bisect import bisect_left

_LEAST_RECENT = 4096  # the recent set is merged once it holds this many (or 1/8 of the rest)


class SeenIds:
    """`add(task_id)` records an id and says whether it is new; `in` tests one."""

    def __init__(self) -> None:
        self._sorted: array[int] = array("Q")
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, str) and self._has(_hash(task_id))

    def add(self, task_id: str) -> bool:
        """Record `task_id`; False when it was already there."""
        key = _hash(task_id)
        if self._has(key):
            return False
        self._recent.add(key)
        if len(self._recent) >= max(_LEAST_RECENT, len(self._sorted) // 8):
            merged = heapq.merge(self._sorted, sorted(self._recent))
            self._sorted = array("Q", merged)
            self._recent = set()
        return True

    def _has(self, key: int) -> bool:
        if key in self._recent:
            return True
        index = bisect_left(self._sorted, key)
        return index < len(self._sorted) and self._sorted[index] == key


def _hash(task_id: str) -> int:
    digest = hashlib.blake2b(task_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")
