"""What a call's URL says about it, for its span: the GenAI operation, the provider, the server.

Read once per URL (cached), never per call: the path names the operation (`chat/completions`,
`messages` and `responses` are chat, `completions` text_completion, `embeddings` embeddings;
anything else, such as a file upload or a batch, is no inference and gets no span), the host
names the provider (the conventions' well-known values), and an unknown host is named by its
API's dialect: `anthropic` for a Messages API, else `openai` (vLLM, Ollama, LM Studio and the
embedded simulated provider speak OpenAI's).
"""

from __future__ import annotations

import functools
from typing import NamedTuple
from urllib.parse import urlsplit

_OPERATIONS = (
    ("/chat/completions", "chat"),
    ("/messages", "chat"),
    ("/responses", "chat"),
    ("/completions", "text_completion"),
    ("/embeddings", "embeddings"),
)
_PROVIDERS = (
    ("openai.azure.com", "azure.ai.openai"),
    ("api.openai.com", "openai"),
    ("anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("bedrock", "aws.bedrock"),
    ("groq.com", "groq"),
    ("mistral.ai", "mistral_ai"),
    ("deepseek.com", "deepseek"),
    ("x.ai", "x_ai"),
    ("perplexity.ai", "perplexity"),
    ("cohere", "cohere"),
    ("moonshot", "moonshot_ai"),
)


class Target(NamedTuple):
    """A call's operation (`gen_ai.operation.name`), provider (`gen_ai.provider.name`) and
    server (`server.address`, `server.port`)."""

    operation: str
    provider: str
    address: str
    port: int


@functools.lru_cache(maxsize=512)
def target_of(url: str) -> Target | None:
    """What a call to `url` is (see the module); None for a request that is no inference."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    operation = next((op for suffix, op in _OPERATIONS if path.endswith(suffix)), None)
    if operation is None:
        return None
    host = (parts.hostname or "").lower()
    provider = next((name for marker, name in _PROVIDERS if marker in host), None)
    if provider is None:
        provider = "anthropic" if path.endswith("/messages") else "openai"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is no number: the scheme's
        port = 443 if parts.scheme == "https" else 80
    return Target(operation, provider, host, port)
