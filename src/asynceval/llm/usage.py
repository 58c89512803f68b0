"""Deprecated: import `UsageCounter`, `current_usage` and `track_usage` from `asynceval.llm`.

They stay importable from here for one release, with a warning when this module is imported.
"""

import warnings

from ..funnel import UsageCounter, current_usage, track_usage

__all__ = ["UsageCounter", "current_usage", "track_usage"]

warnings.warn(
    "asynceval.llm.usage is deprecated and will be removed in the next release; import "
    "UsageCounter, current_usage and track_usage from asynceval.llm",
    DeprecationWarning,
    stacklevel=2,
)
