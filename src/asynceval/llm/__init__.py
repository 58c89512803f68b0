"""LLM providers on httpx, the gateway that bounds every call, and the sync bridge."""

from ._held import reclaiming_leases
from .anthropic import AnthropicChatModel
from .gateway import Gateway
from .model import ChatModel, response_format_for
from .openai import OpenAIChatModel
from .types import Completion, Message, Messages, ToolCall, Usage
from .usage import UsageCounter, current_usage, track_usage

__all__ = [
    "AnthropicChatModel",
    "ChatModel",
    "Completion",
    "Gateway",
    "Message",
    "Messages",
    "OpenAIChatModel",
    "ToolCall",
    "Usage",
    "UsageCounter",
    "current_usage",
    "reclaiming_leases",
    "response_format_for",
    "track_usage",
]
