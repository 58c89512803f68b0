"""The process's shared funnel state (layer 4 of DESIGN section 1): `Runtime`.

One `Runtime` holds what a process shares for its LLM calls: settings read once, the call limiter,
the rate windows, the retry policy, the connection pools of each event loop, the model-call
cache (`CallCache`), the embedded simulated provider, and the sync bridge (`from_thread`: sync
code calling async code on the right loop). Imports config, errors, the kernel, events and
limits; the funnel and every layer above import it.

Also importable from here, for asynceval's own layers and not a public API: `Bridge`,
`bridge_scope`, `current_bridge` (the engine's threads), `EndpointKey`, `CachedAnswer`, `Store`,
`Entry`, `Stats`, `submit`, `spawn` (the funnel), `RunGcThreshold` (runs),
`set_process_default` (the CLI, tests), `RunInProgress` / `run_in_progress` (a run, for the
calls of threads that carry no run's context), and `Prices` / `Price` (what a call costs: DESIGN section
15, being built; not yet used by a run).
"""

from .._moved import moved_names
from ._bridge import Bridge as Bridge
from ._bridge import bridge_scope as bridge_scope
from ._bridge import current_bridge as current_bridge
from ._bridge import from_thread
from ._gc import RunGcThreshold as RunGcThreshold
from ._pools import EndpointKey as EndpointKey
from ._pools import spawn as spawn
from ._runs import RunInProgress as RunInProgress
from ._runs import run_in_progress as run_in_progress
from ._runtime import Runtime
from ._runtime import set_process_default as set_process_default
from ._store import Entry as Entry
from ._store import Stats as Stats
from ._store import Store as Store
from ._store import submit as submit
from .cache import CachedAnswer as CachedAnswer
from .cache import CallCache
from .prices import Price as Price
from .prices import Prices as Prices

__all__ = ["CallCache", "Runtime", "from_thread"]

_MOVED = {
    "Writer": "asynceval._writer",
    "create_client": "asynceval.funnel._clients",
    "process_writer": "asynceval._writer:writer",
    "transport_of": "asynceval.funnel._clients",
}
"""Plumbing that left this package (one release, with a warning)."""
__getattr__ = moved_names(__name__, _MOVED, globals())
