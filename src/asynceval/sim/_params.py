"""Which request parameters the simulated provider cannot honour: those get a 400 naming them.

Everything else is accepted; sampling and bookkeeping parameters (`temperature`, `top_p`, `seed`,
`stop`, `max_tokens`, `user`, `metadata`, `store`, `reasoning`, `truncation`, ...) have no
meaning for a deterministic simulator and are ignored, as are names it does not know (servers
such as vLLM accept extra parameters too). Refused are the parameters whose effect the
simulator would silently fake: log probabilities, more than `MAX_CHOICES` choices, response
formats and tool types it does not know, server-side state (`previous_response_id`,
`conversation`, stored `prompt`s, `background`), audio output and the legacy `functions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynceval.sim._dialect import BadRequest

MAX_CHOICES = 8
"""The largest `n` a chat completion may ask for (OpenAI accepts up to 128; a simulator need not)."""

_CHAT_FORMATS = ("text", "json_object", "json_schema")
_INCLUDE_LOGPROBS = "message.output_text.logprobs"
_NO_STATE = "the simulated provider keeps no state between requests; send the whole conversation"
_NO_LOGPROBS = "the simulated provider does not produce log probabilities"


def unsupported(param: str, why: str) -> BadRequest:
    """The 400 for a request parameter the simulator cannot honour, naming it."""
    return BadRequest(f"Unsupported parameter: '{param}': {why}.", param)


def check_chat(req: Mapping[str, Any]) -> int:
    """Refuse what a chat completions request asks that cannot be honoured; the choices wanted."""
    if req.get("logprobs"):
        raise unsupported("logprobs", _NO_LOGPROBS)
    if req.get("top_logprobs") is not None:
        raise unsupported("top_logprobs", _NO_LOGPROBS)
    for name in ("functions", "function_call"):
        if req.get(name) is not None:
            raise unsupported(name, "the legacy functions API is not simulated; use tools")
    if req.get("audio") is not None or "audio" in (req.get("modalities") or ()):
        raise unsupported("modalities", "the simulated provider answers in text only")
    if req.get("web_search_options") is not None:
        raise unsupported("web_search_options", "the simulated provider cannot search")
    fmt = req.get("response_format")
    if fmt is not None and (not isinstance(fmt, Mapping) or fmt.get("type") not in _CHAT_FORMATS):
        kind = fmt.get("type") if isinstance(fmt, Mapping) else fmt
        raise unsupported("response_format.type", f"{kind!r} is not one of {_CHAT_FORMATS}")
    check_tools(req.get("tools"), nested=True)
    return _choices(req.get("n"))


def check_responses(req: Mapping[str, Any]) -> None:
    """Refuse what a Responses API request asks that cannot be honoured."""
    for name in ("previous_response_id", "conversation", "prompt"):
        if req.get(name) is not None:
            raise unsupported(name, _NO_STATE)
    if req.get("background"):
        raise unsupported("background", "the simulated provider answers at once")
    if req.get("top_logprobs"):
        raise unsupported("top_logprobs", _NO_LOGPROBS)
    if _INCLUDE_LOGPROBS in (req.get("include") or ()):
        raise unsupported("include", f"{_INCLUDE_LOGPROBS}: {_NO_LOGPROBS}")
    text = req.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if fmt is not None and (not isinstance(fmt, Mapping) or fmt.get("type") not in _CHAT_FORMATS):
        kind = fmt.get("type") if isinstance(fmt, Mapping) else fmt
        raise unsupported("text.format.type", f"{kind!r} is not one of {_CHAT_FORMATS}")
    check_tools(req.get("tools"), nested=False)
    choice = req.get("tool_choice")
    if not (choice is None or choice in ("auto", "none", "required") or _names_function(choice)):
        raise unsupported(
            "tool_choice", "only 'auto', 'none', 'required' or a function tool can be chosen"
        )


def check_tools(tools: Any, *, nested: bool) -> None:
    """Only function tools are simulated: `{"type": "function", ...}` with a name.

    `nested`: chat completions put the name under `function`, the Responses API at the top.
    """
    if tools is None:
        return
    if not isinstance(tools, list):
        raise unsupported("tools", "must be an array of function tools")
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind != "function":
            raise unsupported(
                f"tools[{i}].type", f"{kind!r}: the simulated provider has function tools only"
            )
        spec = tool.get("function") if nested else tool
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            where = f"tools[{i}].function.name" if nested else f"tools[{i}].name"
            raise unsupported(where, "a function tool needs a name")


def _choices(n: Any) -> int:
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise unsupported("n", f"{n!r}: the simulated provider gives 1 to {MAX_CHOICES}")
    return n


def _names_function(choice: Any) -> bool:
    return (
        isinstance(choice, Mapping)
        and choice.get("type") == "function"
        and isinstance(choice.get("name"), str)
    )
