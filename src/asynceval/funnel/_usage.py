"""Usage: the tokens a provider reports, read from whatever API answered, and counted into the
repetition (or any `track_usage` block) the call was made in.

A JSON body is a chat completion (`usage.prompt_tokens` / `completion_tokens`), a Responses API
result or an Anthropic message (`usage.input_tokens` / `output_tokens`). A stream (server-sent
events) reports usage in its last chat chunk (with `stream_options.include_usage`), in
`response.completed`, or, for Anthropic, in `message_start` (input) and `message_delta` (output).
Anything else: no usage (the call still counts).

The engine opens one counter per repetition attempt; every LLM call made inside that context (in
async code, or in a worker thread that hops back through the bridge) adds to it. Nothing is passed
by hand.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .._scoped import Scoped


@dataclass(frozen=True)
class Usage:
    """Tokens the provider reports for one completion (0 when it reports none).
    `prompt_tokens` counts every prompt token, those read from the provider's prompt cache
    (`cached_tokens`) and written to it (`cache_write_tokens`) included, whatever the API's own
    split (Anthropic counts its cache tokens apart from `input_tokens`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @classmethod
    def from_body(cls, usage: Any, prompt_key: str, completion_key: str) -> Usage:
        """Usage from a provider's `usage` object; missing or null counts are 0."""
        usage = usage if isinstance(usage, Mapping) else {}
        prompt = _count(usage.get(prompt_key))
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
        written = 0
        if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
            cached = _count(usage.get("cache_read_input_tokens"))  # Anthropic's: apart
            written = _count(usage.get("cache_creation_input_tokens"))
            prompt += cached + written
        return cls(prompt, _count(usage.get(completion_key)), cached, written)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class UsageCounter:
    """Calls, retries and tokens counted in one context. `cache_hits`: the calls (counted in
    `llm_calls`, their tokens too) answered from the model-call cache, without a request;
    `journal_hits`: likewise, replayed from the run's call journal on resume; `hedges`: the
    extra requests sent for calls still out past LLM_HEDGE's delay (each call is counted once in
    `llm_calls`; the tokens of every request that answered, a hedge's included, are counted)."""

    llm_calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    journal_hits: int = 0
    hedges: int = 0
    cached_tokens: int = 0
    unpriced_calls: int = 0
    worst_case_calls: int = 0
    """Priced requests counted at their worst case, for want of reported usage (sent and never
    answered, a stream closed before its usage, a provider that reports none)."""
    cost: Decimal | None = None
    """What the priced requests cost, unrounded (None: none was priced)."""
    budget_refusal: Exception | None = field(default=None, repr=False)
    """The `BudgetExhausted` of a call the run's budget refused (its repetition ends
    `budget_exhausted`), if any."""
    # Per model: [requests answered, their cost (None: unpriced)].
    models: dict[str, list[Any]] = field(default_factory=dict, repr=False)
    # Requests made so far, by cache key: the model-call cache tells the n-th identical one apart.
    requests_seen: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def add_tokens(self, usage: Usage) -> None:
        """Count the tokens an answer reports."""
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_tokens += usage.cached_tokens

    def add_cost(self, model: str, cost: Decimal | None, worst_case: bool = False) -> None:
        """Count one answered request of `model` that cost `cost` (None: it has no price;
        `worst_case`: its worst case, for want of reported usage)."""
        row = self.models.get(model)
        if row is None:
            row = self.models[model] = [0, None]
        row[0] += 1
        if cost is None:
            self.unpriced_calls += 1
            return
        if worst_case:
            self.worst_case_calls += 1
        self.cost = cost if self.cost is None else self.cost + cost
        row[1] = cost if row[1] is None else row[1] + cost

    def as_dict(self) -> dict[str, Any]:
        """The report's `usage`: counts, and `cost_usd` (a float, None when nothing was
        priced; `worst_case_calls` of its calls at their worst case) with `by_model`
        (`{model: {"calls": n, "cost_usd": x}}`)."""
        return {
            "llm_calls": self.llm_calls,
            "failed_calls": self.failed_calls,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_hits": self.cache_hits,
            "journal_hits": self.journal_hits,
            "hedges": self.hedges,
            "cost_usd": None if self.cost is None else float(self.cost),
            "unpriced_calls": self.unpriced_calls,
            "worst_case_calls": self.worst_case_calls,
            "by_model": {
                name: {"calls": calls, "cost_usd": None if cost is None else float(cost)}
                for name, (calls, cost) in self.models.items()
            },
        }


def _count(value: Any) -> int:
    """A token count as a provider reports it: null, missing or not a number is 0."""
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


_current: ContextVar[UsageCounter | None] = ContextVar("asynceval_usage", default=None)


def track_usage(counter: UsageCounter | None = None) -> Scoped[UsageCounter]:
    """Count every LLM call made in this `with` block into `counter` (a new one if not given),
    which entering it returns."""
    return Scoped(_current, counter if counter is not None else UsageCounter())


def current_usage() -> UsageCounter | None:
    """The counter of the innermost `track_usage` around this code, if any."""
    return _current.get()


_TOKEN_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def estimated_tokens(content: bytes, body: Any) -> int:
    """What to charge the token window before the answer says: the request's size in tokens
    (about four bytes each) plus the output cap it asks for (chat, Responses or Anthropic)."""
    cap = 0
    if isinstance(body, Mapping):
        cap = next((body[k] for k in _TOKEN_CAPS if isinstance(body.get(k), int)), 0)
    return len(content) // 4 + cap


def usage_from_body(body: Any) -> Usage | None:
    """The usage a JSON response body reports, or None."""
    if not isinstance(body, dict):
        return None
    if body.get("type") == "response.completed" or body.get("object") == "response.completed":
        body = body.get("response", body)
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return _gemini_usage(body.get("usageMetadata"))
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return Usage.from_body(usage, "prompt_tokens", "completion_tokens")
    if "input_tokens" in usage or "output_tokens" in usage:
        return Usage.from_body(usage, "input_tokens", "output_tokens")
    return None


def _gemini_usage(meta: Any) -> Usage | None:
    """Gemini's and Vertex's `usageMetadata` (its thinking tokens are billed as output), or
    None."""
    if not isinstance(meta, dict) or "promptTokenCount" not in meta:
        return None
    output = _count(meta.get("candidatesTokenCount")) + _count(meta.get("thoughtsTokenCount"))
    prompt = _count(meta.get("promptTokenCount")) + _count(meta.get("toolUsePromptTokenCount"))
    return Usage(prompt, output, _count(meta.get("cachedContentTokenCount")))


def usage_from_json(content: bytes) -> Usage | None:
    """`usage_from_body` of raw JSON bytes; None when they are not JSON."""
    try:
        return usage_from_body(json.loads(content))
    except ValueError:
        return None


class StreamUsage:
    """Reads server-sent events as they pass and keeps the usage they report. A stream has
    reported its usage only once the event that says what it generated has passed: the last
    chat chunk's `usage`, `response.completed`, Anthropic's `message_delta` (its
    `message_start` gives the input tokens and a placeholder output count, so a stream closed
    before `message_delta` reports nothing and counts at its worst case)."""

    __slots__ = ("_pending", "cached", "completion", "prompt", "seen", "written")

    def __init__(self) -> None:
        self._pending = b""
        self.prompt = 0
        self.completion = 0
        self.cached = 0
        self.written = 0
        self.seen = False

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream (lines may be split across chunks)."""
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                self._data(line[5:].strip())

    def _data(self, payload: bytes) -> None:
        if not payload or payload == b"[DONE]" or b"usage" not in payload:
            return  # most chunks carry no usage: no JSON parse for them
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        message = event.get("message")
        if event.get("type") == "message_start" and isinstance(message, dict):
            # Anthropic: the input tokens come first, but the answer's usage is not known
            # until `message_delta` (a stream closed before it costs its worst case).
            found = usage_from_body(message)
            if found is not None:
                self.prompt = found.prompt_tokens
                self.cached, self.written = found.cached_tokens, found.cache_write_tokens
            return
        usage = event.get("usage")
        if event.get("type") == "message_delta" and isinstance(usage, dict):
            found = Usage.from_body(usage, "input_tokens", "output_tokens")
            if found.prompt_tokens:  # newer APIs repeat every count here, cumulative
                self.prompt = found.prompt_tokens
                self.cached, self.written = found.cached_tokens, found.cache_write_tokens
            self.completion = _count(usage.get("output_tokens"))
            self.seen = True
            return
        found = usage_from_body(event)
        if found is not None:
            self.prompt, self.completion, self.seen = (
                found.prompt_tokens,
                found.completion_tokens,
                True,
            )
            self.cached, self.written = found.cached_tokens, found.cache_write_tokens

    def usage(self) -> Usage | None:
        """What the stream reported so far, or None if it reported nothing."""
        if not self.seen:
            return None
        return Usage(self.prompt, self.completion, self.cached, self.written)
