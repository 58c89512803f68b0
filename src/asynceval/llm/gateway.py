"""Deprecated: the gateway is the funnel's now (`asynceval.funnel`, not a public API).

`Gateway`, `MAX_REQUEUES` and `UNSET` stay importable from here for one release, with a warning
when this module is imported; the module goes in the next release.
"""

import warnings

from ..funnel import MAX_REQUEUES, UNSET, Gateway

__all__ = ["MAX_REQUEUES", "UNSET", "Gateway"]

warnings.warn(
    "asynceval.llm.gateway is deprecated and will be removed in the next release; the gateway "
    "is internal now (asynceval.funnel, not a public API): make calls through a model or "
    "asynceval.http_client()",
    DeprecationWarning,
    stacklevel=2,
)
