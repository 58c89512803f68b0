"""asynceval: an asyncio-native engine for running LLM and agent evaluations.

Every LLM call goes through one bounded funnel (`ConcurrencyController`), retries with exponential
backoff (`RetryPolicy`), and writes structured JSON events (`configure_logging`). Limits come from
`Settings` (environment and `.env`).
"""

from .config import Settings
from .errors import (
    AsyncEvalError,
    AttemptTimeout,
    ConfigError,
    LLMCallFailed,
    MalformedResponse,
    ProviderConnectionError,
    ProviderError,
    RateLimited,
)
from .events import bind_context, configure_logging, register_secret
from .limits import (
    ConcurrencyController,
    ControllerStatistics,
    RateLimiter,
    RetryPolicy,
    default_controller,
)
from .llm import (
    AnthropicChatModel,
    ChatModel,
    Completion,
    OpenAIChatModel,
    ToolCall,
    Usage,
    UsageCounter,
    track_usage,
)

__version__ = "0.1.0"

__all__ = [
    "AnthropicChatModel",
    "AsyncEvalError",
    "AttemptTimeout",
    "ChatModel",
    "Completion",
    "ConcurrencyController",
    "ConfigError",
    "ControllerStatistics",
    "LLMCallFailed",
    "MalformedResponse",
    "OpenAIChatModel",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimited",
    "RateLimiter",
    "RetryPolicy",
    "Settings",
    "ToolCall",
    "Usage",
    "UsageCounter",
    "__version__",
    "bind_context",
    "configure_logging",
    "default_controller",
    "register_secret",
    "track_usage",
]
