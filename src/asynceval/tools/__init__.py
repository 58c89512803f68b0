"""Tools for agents: declared resources, and an executor that runs non-conflicting calls at once."""

from .executor import ERROR_PREFIX, TOOL_WAVE, ToolExecutor
from .tool import Tool

__all__ = ["ERROR_PREFIX", "TOOL_WAVE", "Tool", "ToolExecutor"]
