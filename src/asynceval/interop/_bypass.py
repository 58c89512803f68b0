"""Calls around the funnel, seen at a run's end: SDK clients whose transport is not ours.

An agent whose SDK client sends on its own HTTP client meets no limit, retry, event or usage
count, and `asynceval logs check` sees none of its calls: the provider saw 13-30 in flight at
limit 2 while the check said the limit held. No request of such a client passes through
asynceval, so the clients themselves are looked for. At the end of a run (the engine calls
`check_clients` as the run's `run_finished` is written), every OpenAI and Anthropic SDK client
alive in the process (only when `openai` / `anthropic` is already imported: nothing is imported
to look) whose httpx (or httpx2) client's transport is not a `FunnelTransport` / `SyncFunnelTransport`
(or `Httpx2FunnelTransport` / `SyncHttpx2FunnelTransport` on one) is
named in one `funnel_bypassed` WARNING. A client on the funnel whose own `max_retries` would
stack on the funnel's gets the `sdk_retries_stacked` warning, if the run has not had it
(`asynceval.interop._sdk`).

Finding them: `gc.get_referrers(*client_classes)` walks the collector's objects in C (an
instance refers to its class): measured here 15-60 ms over 100,000 objects and 50-180 ms over a
million (a loaded machine), against 420 ms or more for `gc.get_objects()` filtered in Python;
once per run, never per call. What it can miss: a client already collected when the run ends
(one made per repetition and dropped: the SDK's clients sit in reference cycles, so they often
outlive their repetition, but not surely), and a user's transport that wraps ours is named as a
bypass. What it may name too many: a client alive in the process that the run never used.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from .. import events
from ..runtime import Runtime
from ._sdk import warn_configured
from ._transport import FunnelTransport, SyncFunnelTransport

_SDKS = {"openai": ("OpenAI", "AsyncOpenAI"), "anthropic": ("Anthropic", "AsyncAnthropic")}
"""The SDK modules looked at, and their public client classes (with their subclasses: Azure,
Bedrock, the module-level client)."""
NAMED = 10
"""Bypassing clients named in the warning (all are counted)."""


def _client_classes() -> tuple[type, ...]:
    """The SDK client classes of the SDKs already imported, subclasses included."""
    found: list[type] = []
    for module_name, names in _SDKS.items():
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            cls = getattr(module, name, None)
            if isinstance(cls, type):
                found += _with_subclasses(cls)
    return tuple(dict.fromkeys(found))


def _with_subclasses(cls: type) -> list[type]:
    found = [cls]
    sub: type
    for sub in cls.__subclasses__():
        found += _with_subclasses(sub)
    return found


def sdk_clients() -> list[Any]:
    """The OpenAI / Anthropic SDK clients alive in the process (none if neither is imported)."""
    classes = _client_classes()
    if not classes:
        return []
    return [obj for obj in gc.get_referrers(*classes) if isinstance(obj, classes)]


def _transport_of(client: Any) -> Any:
    """The transport an SDK client's requests go to: its httpx client's (`_client._transport`,
    the SDKs' and httpx's private attributes, read and never changed), or None if not found."""
    return getattr(getattr(client, "_client", None), "_transport", None)


def on_funnel(client: Any) -> bool:
    """Whether an SDK client sends through the funnel (or has no httpx client to look at)."""
    transport = _transport_of(client)
    ours = FunnelTransport | SyncFunnelTransport
    # An httpx2 client (the Anthropic SDK 2.x) on the funnel holds ours behind its transport.
    return (
        transport is None
        or isinstance(transport, ours)
        or isinstance(getattr(transport, "funnel", None), ours)
    )


def describe(client: Any) -> str:
    """`AsyncOpenAI(base_url=..., transport=AsyncHTTPTransport)`, for the warning."""
    transport = type(_transport_of(client)).__name__
    return f"{type(client).__name__}(base_url={getattr(client, 'base_url', '?')}, {transport=!s})"


def check_clients(runtime: Runtime | None = None) -> list[str]:
    """Look at the SDK clients alive now: `funnel_bypassed` naming those that send around the
    funnel, and `sdk_retries_stacked` for a client on it with `max_retries` above 0 (unless
    the current run warned already). Returns the bypassing clients' descriptions."""
    bypassing: list[str] = []
    stacking: tuple[str, int] | None = None
    for client in sdk_clients():
        if not on_funnel(client):
            bypassing.append(describe(client))
        elif stacking is None:
            retries = getattr(client, "max_retries", 0)
            if isinstance(retries, int) and retries > 0:
                stacking = (type(client).__name__, retries)
    if bypassing:
        events.funnel_bypassed(clients=sorted(bypassing)[:NAMED], count=len(bypassing))
    if stacking is not None:
        warn_configured(runtime or Runtime.current(), *stacking)
    return bypassing
