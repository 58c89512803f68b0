"""The run's end looks for calls around the funnel (`asynceval.interop.check_clients`).

`watch_run` sits around `Benchmark.run`. It observes the events, so that the check runs as the
run's `run_finished` is written: in the run's context, hence into the run's events file, the
`funnel_bypassed` line just before `run_finished`, and for a run that failed or was cancelled
too. Nothing is added to a call (an observer costs a comparison per event), and nothing heavy is
imported: the check, and `asynceval.interop` with it, is loaded only when an SDK it looks for
(`openai`, `anthropic`) is already imported, i.e. when there can be a client to find.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from .. import events

SDK_MODULES = ("openai", "anthropic")
"""The SDKs whose clients the check looks for."""


@contextlib.contextmanager
def watch_run(run_id: str) -> Iterator[None]:
    """Around the run `run_id`: when its `run_finished` is written, the SDK clients alive in the
    process are looked at (see the module)."""

    def observe(event: str, fields: Mapping[str, Any]) -> None:
        if event != events.RUN_FINISHED or events.context_value("run_id") != run_id:
            return
        if not any(name in sys.modules for name in SDK_MODULES):
            return
        # The check is advice: it must never cost the run its last line.
        with contextlib.suppress(Exception):
            from ..interop import check_clients

            check_clients()

    events.add_observer(observe, only=(events.RUN_FINISHED,))
    try:
        yield
    finally:
        events.remove_observer(observe)
