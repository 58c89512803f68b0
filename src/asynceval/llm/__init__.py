"""The chat models (layer 6 of DESIGN section 1): codecs for provider APIs on the funnel.

A model builds a request body from OpenAI-style messages and reads a `Completion` from the
answer; `asynceval.funnel` sends it (slot, rate windows, deadline, retries, cache, usage).
`track_usage` counts the calls made in a block. Imported by the engine, agents, tools,
evaluation and the edges; imports the funnel, the runtime and the layers below.
"""

from .._moved import moved_names
from ..funnel import Usage, UsageCounter, current_usage, track_usage
from .anthropic import AnthropicChatModel
from .model import ChatModel, response_format_for
from .openai import OpenAIChatModel
from .types import Completion, Message, Messages, ToolCall

__all__ = [
    "AnthropicChatModel",
    "ChatModel",
    "Completion",
    "Message",
    "Messages",
    "OpenAIChatModel",
    "ToolCall",
    "Usage",
    "UsageCounter",
    "current_usage",
    "response_format_for",
    "track_usage",
]

_MOVED = {"Gateway": "asynceval.funnel", "reclaiming_leases": "asynceval.funnel"}
"""Plumbing that left this package's surface (one release, with a warning)."""
__getattr__ = moved_names(__name__, _MOVED, globals())
