"""The process's shared funnel state (`Runtime`), its per-loop pools and the sync bridge."""

from .._writer import Writer
from .._writer import writer as process_writer
from ._bridge import Bridge, bridge_scope, current_bridge, from_thread
from ._gc import RunGcThreshold
from ._pools import EndpointKey, create_client, spawn, transport_of
from ._runtime import Runtime
from ._runtime import _reset_default as _reset_default
from .cache import CachedAnswer, CallCache

__all__ = [
    "Bridge",
    "CachedAnswer",
    "CallCache",
    "EndpointKey",
    "RunGcThreshold",
    "Runtime",
    "Writer",
    "bridge_scope",
    "create_client",
    "current_bridge",
    "from_thread",
    "process_writer",
    "spawn",
    "transport_of",
]
