"""Tools for agents (layer 8 of DESIGN section 1): declared resources (`Tool`), and an executor
(`ToolExecutor`) that runs non-conflicting calls at once, in call order. A failing tool's
result starts with `ERROR_PREFIX`. Imports the engine and the layers below; the edges import it.
"""

from .._moved import moved_names
from .executor import ERROR_PREFIX, ToolExecutor
from .tool import Tool

__all__ = ["ERROR_PREFIX", "Tool", "ToolExecutor"]

_MOVED = {"TOOL_WAVE": "asynceval.events"}
"""An event name that left this package's surface: event names live in `asynceval.events`."""
__getattr__ = moved_names(__name__, _MOVED, globals())
