"""The funnel: everything one LLM call goes through, in one room (layer 5 of DESIGN section 1).

A call's journey, in order: the run's call journal (a resumed repetition's finished call ends it
there), the model-call cache (a stored answer ends it there), then per
attempt a slot of the runtime's global FIFO limiter (within the endpoint's 429 pause and
adaptive limit), the attempt's turn in the RPM/TPM windows, the send within LLM_CALL_TIMEOUT
(over HTTP on the loop's pool, or in process to the embedded simulator), the reply read, its
usage counted into the repetition, and the slot released (or kept by a streamed answer until it
is read or closed). Retries with backoff and Retry-After wrap the attempts, outside the slot.

`Route` is the one entry: `asynceval.llm`'s models `post` their encoded requests through it,
`asynceval.interop`'s transports `send` any httpx request through it, and nothing else sends
HTTP to a provider. The funnel imports layers 1-4 (config, errors, the kernel, events, limits,
runtime); `llm`, `interop` and the layers above them import it, and only through this package:
its modules are private. Not a public API: users reach the funnel through models, `http_client()`
and `track_usage`; the engine binds a run's `CallJournal` with `journal_scope`.

The batch lane (LLM_LANE=batch, DESIGN section 16): a route whose lane is batch sends its
batchable calls into provider batches through its runtime's `BatchLane` (`BatchLane.of(runtime)`:
`keep_batches`, `aclose()`), journaled as `BatchJournal` says (`FileBatchJournal`: `batches.jsonl`
beside the run's call journal). A runtime that runs part of another process's run (a Dask
worker's) relays its lines into that process's batches (`BatchLane.relay`, a `BatchRelay`; the
owner answers each `RelayedLine` with `relayed_line`).
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._call import call_of
from ._gateway import MAX_REQUEUES, UNSET, Gateway, Overrides
from ._held import reclaiming_leases
from ._journal import CallJournal, current_journal, journal_scope
from ._replies import Reply, check_response, parse_or_malformed, parse_retry_after
from ._route import SIM_BASE_URL, Route, endpoint_of, in_process
from ._usage import Usage, UsageCounter, current_usage, track_usage

if TYPE_CHECKING:
    from ._batch_journal import NO_BATCH_JOURNAL, BatchJournal, FileBatchJournal
    from ._batch_lane import BatchLane
    from ._batch_relay import BatchRelay, RelayedLine, relayed_line
    from ._batch_wire import LineResult
    from ._exchange import send_from_thread

# Loaded with their first use, not with `import asynceval`: httpx's side of the funnel (a caller's
# SDK) and the batch lane (LLM_LANE=batch), each several modules most runs never use.
_LAZY = {
    "send_from_thread": "._exchange",
    "NO_BATCH_JOURNAL": "._batch_journal",
    "BatchJournal": "._batch_journal",
    "FileBatchJournal": "._batch_journal",
    "BatchLane": "._batch_lane",
    "BatchRelay": "._batch_relay",
    "RelayedLine": "._batch_relay",
    "relayed_line": "._batch_relay",
    "LineResult": "._batch_wire",
}

__all__ = [
    "MAX_REQUEUES",
    "NO_BATCH_JOURNAL",
    "SIM_BASE_URL",
    "UNSET",
    "BatchJournal",
    "BatchLane",
    "BatchRelay",
    "CallJournal",
    "FileBatchJournal",
    "Gateway",
    "LineResult",
    "Overrides",
    "RelayedLine",
    "Reply",
    "Route",
    "Usage",
    "UsageCounter",
    "call_of",
    "check_response",
    "current_journal",
    "current_usage",
    "endpoint_of",
    "in_process",
    "journal_scope",
    "parse_or_malformed",
    "parse_retry_after",
    "reclaiming_leases",
    "relayed_line",
    "send_from_thread",
    "track_usage",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
