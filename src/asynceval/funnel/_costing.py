"""Costing: what one call costs, and its share of the run's budget (docs/guides/cost.md).

A route finds the price of each request's model once (`Pricing`: the caller's own `price=`,
else the runtime's `Prices`: LLM_PRICES_FILE, the simulator's, genai-prices'), and gives the
gateway a `Costing` per model call: the model, its price (None: unpriced), the bounds of the
call's worst case and the run's budget. Each request (a retry's, a hedge's) then reserves its
worst case against the budget before it is sent and is priced from the usage its answer reports
when its lease is released, onto its `released` event and the repetition's usage.

Which requests are model calls: a JSON body naming its `model`, or a POST to a model endpoint
of a body holding a prompt but no model (`model_path`: chat/completions, completions, responses,
messages, embeddings, Gemini's and Vertex's `:generateContent`, Bedrock's converse and invoke,
thread runs...). The latter's model is read from its URL where it is there (`models/NAME:generateContent`,
`model/NAME/converse`, `deployments/NAME/...`), else it is unknown: unpriced, so refused under a
budget (`CostUnbounded`) and counted as an unpriced call without one. Anything else (a GET, a
file upload, a batch's creation, a count of a prompt's tokens) is no model call: no costing,
never refused.

The worst case of a request: its prompt bound, plus the output cap it asks for (max_tokens,
max_completion_tokens, max_output_tokens, Gemini's generationConfig.maxOutputTokens: a whole
number >= 1; a smaller one bounds nothing, as a provider that answers it at all ignores it),
else the model's (`Price.output_cap`), no more than the model's own output limit when it has
one, for each of the `n` choices a chat completion asks for. The prompt bound:

- one token per byte of the request body (a tokenizer's tokens are at least a byte of text
  each, and the body holds the prompt, its tools and its JSON around them), times the most
  tokens per byte an answer of that model and endpoint has reported so far (`PromptRatio`: a
  provider that adds hidden tokens, or a simulator that counts 20 tokens a character, raises
  it for every later request), plus `TOOLS_ALLOWANCE` tokens when the request declares tools
  (the system prompt a provider adds for them: Anthropic's is about 350 tokens);
- the model's context window when the prompt holds what the body does not (`server_context`:
  a Responses `previous_response_id`, `conversation` or stored `prompt`, a file or an image
  given by id or URL, a built-in tool such as web_search or file_search, Gemini's
  cachedContent). Under a budget, such a call to a model without a known context window
  (genai-prices', or `context_window` in its LLM_PRICES_FILE entry) is refused with one line
  naming that key.

What still escapes the bound: the request of a model sent before its first answer shows its
tokens per byte (a budget lets one out at a time until then: `Costing.reserve`; in the batch
lane, the lines of its first batch, which do not wait a batch round trip for it), which costs
at most what its answer reports beyond its reservation, counted as the budget's `overrun`; and
an inline image sent to a model that counts an image at more tokens than its bytes (OpenAI's
mini models): the next requests reserve with the ratio learned from it.

A request sent and never answered (timed out, cancelled, its connection lost) may still be
billed: it counts at its worst case (`cost_unknown` on its event).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import anyio

from ..config import Lane
from ..errors import CostUnbounded
from ..limits import CostBudget, current_budget

if TYPE_CHECKING:
    from ..runtime import Price, Prices
    from ..runtime.prices import PromptRatio

_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
_PROBE_POLL_S = 0.005
"""How often a request waiting for its model's first answer (the probe) looks again."""
TOOLS_ALLOWANCE = 1_000
"""The prompt tokens added to the bound of a request that declares tools: what a provider
adds for them beyond the body (Anthropic's tool-use system prompt is 313-346 tokens)."""
_MODEL_PATHS = (
    "/chat/completions",
    "/completions",
    "/responses",
    "/messages",
    "/embeddings",
    "/converse",
    "/converse-stream",
    "/invoke",
    "/invoke-with-response-stream",
    "/api/generate",
    "/api/chat",
    ":generateContent",
    ":streamGenerateContent",
    ":predict",
    ":rawPredict",
    ":streamRawPredict",
)
_PROMPTS = ("messages", "contents", "input", "prompt", "instances", "inputText", "inputs")
"""The keys of a body that holds a prompt (chat, Gemini, Responses and embeddings, completions,
Vertex's predict, Bedrock's invoke)."""
_FREE_PATHS = ("/count_tokens", "/input_tokens", ":countTokens")
"""Endpoints that take a model and a prompt but bill nothing (they count its tokens)."""
_URL_MODEL = re.compile(r"/(?:models/([^/:]+):|model/([^/]+)/|deployments/([^/]+)/)")
_NO_MODEL = "(no model in the request)"
_CLIENT_TOOLS = frozenset({"function", "custom"})
_GEMINI_CLIENT_TOOLS = frozenset({"functionDeclarations", "function_declarations"})
_CONTEXT_KEYS = (
    ("previous_response_id", "a previous_response_id"),
    ("conversation", "a conversation"),
    ("cachedContent", "cachedContent"),
    ("cached_content", "cached_content"),
    ("mcp_servers", "MCP servers"),
    ("container", "a container"),
)
_TURNS = ("messages", "input", "contents")
"""Where a body holds its prompt's turns: chat, Responses and Anthropic, Gemini."""
_REFERENCES = ("file_id", "file_url", "fileUri", "file_uri")


def model_path(path: str, body: Mapping[str, Any]) -> bool:
    """Whether a POST of `body` (which names no model) to `path` is a model call: a model
    endpoint's path, and a body holding a prompt (a tool's POST to some site's `/messages` is
    none)."""
    path = path.rstrip("/")
    if path.endswith("/runs"):
        return "/threads/" in path and "assistant_id" in body  # OpenAI's thread runs
    return path.endswith(_MODEL_PATHS) and any(key in body for key in _PROMPTS)


def server_context(body: Mapping[str, Any]) -> str | None:
    """Why a request's prompt holds more than its body (in words), or None (see the module)."""
    for key, words in _CONTEXT_KEYS:
        if body.get(key):
            return words
    prompt = body.get("prompt")
    if isinstance(prompt, dict) and prompt.get("id"):
        return "a stored prompt (prompt.id)"
    tools = body.get("tools")
    if isinstance(tools, list):
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            kind = tool.get("type")
            if kind is None and "name" not in tool and tool.keys() - _GEMINI_CLIENT_TOOLS:
                return f"the built-in tool {next(iter(tool))!r}"  # Gemini's googleSearch...
            if kind is not None and kind not in _CLIENT_TOOLS:
                return f"the built-in tool {kind!r}"
    for key in _TURNS:  # a look at each turn's parts, not at every byte or node of the body
        turns = body.get(key)
        if isinstance(turns, list):
            for turn in turns:
                if isinstance(turn, dict) and type(turn.get("content")) is not str:
                    found = _reference(turn) or _parts(turn.get("content"), turn.get("parts"))
                    if found is not None:
                        return found
    return None


def _parts(*lists: Any) -> str | None:
    """A file or an image given by reference among the parts in `lists` (a tool result's own
    parts included), in words; else None."""
    for parts in lists:
        if not isinstance(parts, list):
            continue
        for part in parts:
            if isinstance(part, dict):
                found = _reference(part) or _parts(part.get("content"))
                if found is not None:
                    return found
    return None


def _reference(part: Mapping[str, Any]) -> str | None:
    """Whether one part of a prompt is a file or an image given by id or URL, in words."""
    for key in _REFERENCES:
        if isinstance(part.get(key), str):
            return f"a file given by reference ({key})"
    if isinstance(part.get("fileData") or part.get("file_data"), dict):
        return "a file given by reference (fileData)"  # Gemini's
    kind = part.get("type")
    if kind in ("document", "input_file"):
        return f"a file input ({kind}: its pages count as images)"
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if isinstance(url, str) and not url.startswith("data:"):
        return "an image given by URL"
    source = part.get("source")
    if kind == "image" and isinstance(source, dict) and source.get("type") != "base64":
        return "an image given by URL or file"
    return None


class Costing:
    """One call's price and budget (see the module); shared by its requests.

    `prompt_bytes` is its body's size; `context` the prompt bound of a call whose prompt holds
    server-side context (`unbounded` says why; None: bounded by its bytes); `ratio` the model's
    learned tokens per byte; `allowance` the tokens a provider adds (declared tools)."""

    __slots__ = (
        "allowance",
        "budget",
        "choices",
        "context",
        "model",
        "output_cap",
        "price",
        "prompt_bytes",
        "ratio",
        "unbounded",
    )

    def __init__(
        self,
        model: str,
        price: Price | None,
        prompt_bytes: int,
        output_cap: int | None,
        budget: CostBudget | None,
        choices: int = 1,
        *,
        ratio: PromptRatio | None = None,
        allowance: int = 0,
        unbounded: str | None = None,
        context: int | None = None,
    ) -> None:
        self.model = model
        self.price = price
        self.prompt_bytes = prompt_bytes
        self.output_cap = output_cap  # per choice; None: the model's
        self.budget = budget
        self.choices = choices  # the answers a request asks for (a chat completion's `n`)
        self.ratio = ratio
        self.allowance = allowance
        self.unbounded = unbounded
        self.context = context

    @property
    def prompt_bound(self) -> int:
        """The most prompt tokens one of its requests may be billed (see the module)."""
        if self.unbounded is not None and self.context is not None:
            return self.context
        ratio = 1.0 if self.ratio is None else self.ratio.value
        return math.ceil(self.prompt_bytes * ratio) + self.allowance

    def worst_case(self) -> Decimal:
        """The most one request of this call can cost (0 when unpriced)."""
        price = self.price
        if price is None:
            return Decimal(0)
        bound = self.prompt_bound
        cap = self.output_cap
        if cap is None:
            cap = price.output_cap(bound)
        elif price.max_output_tokens is not None:
            cap = min(cap, price.max_output_tokens)  # the model answers no more than that
        return price.worst_case(bound, cap * self.choices)

    async def reserve(self) -> Decimal:
        """Reserve one request's worst case against the budget (there is one) and return it,
        its share; `BudgetExhausted` when it does not fit. Before any answer of its model has
        said its tokens per byte, it waits for the request out before it (`PromptRatio`)."""
        budget = self.budget
        assert budget is not None
        ratio = self.ratio if self.unbounded is None else None
        while ratio is not None and not ratio.confirmed:
            share = self.worst_case()
            if ratio.hold(share):
                try:
                    await budget.reserve(share)
                except BaseException:
                    ratio.let_go(share)
                    raise
                return share
            await anyio.sleep(_PROBE_POLL_S)
        share = self.worst_case()
        await budget.reserve(share)
        return share

    def settle(self, share: Decimal, cost: Decimal, *, waited: bool = True) -> None:
        """A request that reserved `share` cost `cost` (`waited`: it had not become a
        stream): settled against the budget."""
        assert self.budget is not None
        self.budget.settle(share, cost, waited=waited)
        if self.ratio is not None:
            self.ratio.let_go(share)

    def streaming(self, share: Decimal) -> None:
        """The request that reserved `share` became a stream read by its caller: no longer
        waited for (its reader may be the code waiting for budget, or for the probe)."""
        assert self.budget is not None
        self.budget.streaming()
        if self.ratio is not None:
            self.ratio.let_go(share)

    def observed(self, prompt_tokens: int) -> None:
        """An answer of this call reported `prompt_tokens`: above its bound (a prompt bounded
        by its bytes), the model's tokens per byte are raised for every later request."""
        if self.ratio is not None and self.unbounded is None:
            self.ratio.observe(prompt_tokens - self.allowance, self.prompt_bytes)


class Pricing:
    """A route's prices: per model, found once (from any thread), in the route's `lane` (live,
    flex or batch: genai-prices' price variant). `own` is the caller's price for every model it
    sends (a model's `price=`); `base_url` tells genai-prices the provider."""

    __slots__ = ("_base_url", "_found", "_lock", "_own", "_prices", "lane")

    def __init__(
        self,
        prices: Prices,
        base_url: str | None,
        own: Price | None = None,
        lane: Lane = "live",
    ) -> None:
        self._prices = prices
        self._base_url = base_url
        self._own = own
        self.lane = lane
        self._found: dict[str, Price | None] = {}
        self._lock = threading.Lock()

    def price(self, model: str) -> Price | None:
        """`model`'s price, or None."""
        if self._own is not None:
            return self._own
        try:
            return self._found[model]
        except KeyError:
            pass
        found = self._prices.price(model, base_url=self._base_url, lane=self.lane)
        with self._lock:
            self._found[model] = found
        return found

    def costing(
        self, content: bytes, body: Any, path: str | None = None, method: str = "POST"
    ) -> Costing | None:
        """A call's `Costing` from its request body and, for a body that names no model, the
        `path` it is sent to (None: not a model call; see the module). Under a budget, a call
        whose cost cannot be bounded is refused with `CostUnbounded`: its model has no price
        (or none is named), or its prompt holds server-side context and its model has no known
        context window."""
        mapping = (
            body if isinstance(body, dict) else dict(body) if isinstance(body, Mapping) else {}
        )
        if path is not None and path.endswith(_FREE_PATHS):
            return None  # a count of a prompt's tokens: free, and answered with no usage
        model = mapping.get("model")
        if not isinstance(model, str):
            if path is None or method.upper() != "POST" or not model_path(path, mapping):
                return None
            found = _URL_MODEL.search(path)
            model = next((name for name in found.groups() if name), _NO_MODEL) if found else None
            model = model or _NO_MODEL
        price = None if model == _NO_MODEL else self.price(model)
        budget = current_budget()
        if budget is not None and price is None:
            raise CostUnbounded(_unpriced(model, path))
        unbounded = server_context(mapping) if mapping else None
        context = None if price is None else price.context_window
        if budget is not None and unbounded is not None and context is None:
            raise CostUnbounded(
                f"a call to {model!r} holds {unbounded}, so its prompt is more than its body and "
                "a budget (MAX_COST_USD / --max-cost) cannot bound it: give the model's context "
                f'window in LLM_PRICES_FILE ({{"{model}": {{"input_mtok": ..., "output_mtok": '
                '..., "context_window": 128000}}), or run without a budget'
            )
        cap = _output_cap(mapping)
        choices = mapping.get("n")
        if type(choices) is not int or choices < 1:
            choices = 1
        tools = mapping.get("tools")
        return Costing(
            model,
            price,
            len(content),
            cap,
            budget,
            choices,
            ratio=self._prices.prompt_ratio(model, self._base_url),
            allowance=TOOLS_ALLOWANCE if isinstance(tools, list) and tools else 0,
            unbounded=unbounded,
            context=context,
        )


def _output_cap(body: Mapping[str, Any]) -> int | None:
    """The output cap a body asks for (see the module), or None."""
    for key in _CAPS:
        value = body.get(key)
        if type(value) is int and value >= 1:  # below 1 bounds nothing
            return value
    config = body.get("generationConfig") or body.get("generation_config")
    if isinstance(config, dict):
        value = config.get("maxOutputTokens", config.get("max_output_tokens"))
        if type(value) is int and value >= 1:
            return value
    return None


def _unpriced(model: str, path: str | None) -> str:
    """The one line refusing a call with no price under a budget."""
    if model == _NO_MODEL:
        return (
            f"a call to {path} names no model (in its body or its URL), so a budget "
            "(MAX_COST_USD / --max-cost) cannot price it: send the model in the body, or run "
            "without a budget"
        )
    return (
        f"the model {model!r} has no price, so a budget (MAX_COST_USD / --max-cost) cannot "
        "bound its calls: give its price in LLM_PRICES_FILE (or price= on the model), or run "
        "without a budget"
    )
