"""The collector's young-generation threshold while runs go (RUN_GC_THRESHOLD).

A run keeps hundreds of repetitions alive, each a stack of coroutines, scopes and futures. With
CPython's default threshold (700 net allocations) the collector walks that live set every few
repetitions, promotes it, and every thousand or so repetitions walks the whole heap: about 30 us
of CPU per repetition at 50 ms latency, and pauses of up to tens of milliseconds during which no
answer is read. A higher young threshold while runs go makes those walks rarer; garbage without
cycles is freed at once as always, and cycles still go at the next collection.

The thresholds are process-wide: the first run raises the young one (never lowers it), the last
run to end puts back what it found, unless the application set other thresholds meanwhile (then
those stay). Runs in several threads or event loops at once share one raise.
"""

from __future__ import annotations

import gc
import os
import threading
from types import TracebackType

_lock = threading.Lock()
_runs = 0
_found: tuple[int, ...] | None = None  # the thresholds before the first run raised them
_set: tuple[int, ...] | None = None  # what that run set


class RunGcThreshold:
    """`with RunGcThreshold(threshold):` around a run; 0 (or a threshold no higher than the one
    in force) changes nothing."""

    __slots__ = ("_threshold",)

    def __init__(self, threshold: int) -> None:
        self._threshold = threshold

    def __enter__(self) -> None:
        global _runs, _found, _set
        with _lock:
            _runs += 1
            if _found is not None or not self._threshold:
                return  # raised already (by an earlier run still going), or not asked for
            found = gc.get_threshold()
            if self._threshold > found[0]:
                gc.set_threshold(self._threshold, *found[1:])
                _found, _set = found, gc.get_threshold()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _runs, _found, _set
        with _lock:
            _runs -= 1
            if _runs == 0 and _found is not None:
                if gc.get_threshold() == _set:  # else the application chose its own: kept
                    gc.set_threshold(*_found)
                _found = _set = None


def _forked() -> None:
    """A forked child runs none of its parent's runs: its own start from the thresholds it has
    (and a lock held by a thread of the parent at the fork would never be released here)."""
    global _lock, _runs, _found, _set
    _lock, _runs, _found, _set = threading.Lock(), 0, None, None


os.register_at_fork(after_in_child=_forked)
