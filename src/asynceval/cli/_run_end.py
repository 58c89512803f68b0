"""What `asynceval run` says on stderr once its summary is out: answers the disk refused to keep
(the model-call cache's or the call journal's: the run is whole, a later run pays for them
again), sync threads abandoned by task timeouts that are still running as it exits, and LLM calls
from threads that carried no repetition's context (counted for the run: its summary has them)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from ..engine.run_paths import journal_path
from ..events import OUTSIDE_REPETITIONS_ADVICE
from ..runtime import Runtime


def say_not_kept(failures: Mapping[str, int], runtime: Runtime, out: Path) -> None:
    """Answers the disk refused to the cache or the journal: the run is whole, but a second
    run or a resume pays for them again."""
    where = {
        "cache": f"the model-call cache ({runtime.cache.directory if runtime.cache else '?'})",
        "journal": f"the call journal ({journal_path(out / 'results.jsonl')})",
    }
    for store, count in failures.items():
        print(
            f"asynceval: warning: {count} answer{'s' if count != 1 else ''} could not be kept in "
            f"{where.get(store, store)}: the disk refused them; the run's results are whole",
            file=sys.stderr,
        )


def say_abandoned(count: int) -> None:
    """Sync threads abandoned by task timeouts and still running: the process exits without
    waiting for them (one line, when there are any)."""
    if count:
        print(
            f"{count} sync thread{'s' if count != 1 else ''} abandoned by task timeouts "
            f"{'are' if count != 1 else 'is'} still running; exiting without waiting for "
            f"{'them' if count != 1 else 'it'}",
            file=sys.stderr,
        )
        sys.stderr.flush()


def say_outside(outside: tuple[int, float | None] | None) -> None:
    """One line when LLM calls came from threads that carry no repetition's context: they are
    the run's (budgeted, in its events and summary), in no repetition's usage."""
    if outside is not None and outside[0]:
        calls = outside[0]
        print(
            f"asynceval: warning: {calls} LLM call{'s' if calls != 1 else ''} came from threads "
            "that carry no repetition's context: counted for the run, in no repetition's usage; "
            f"{OUTSIDE_REPETITIONS_ADVICE}",
            file=sys.stderr,
        )
