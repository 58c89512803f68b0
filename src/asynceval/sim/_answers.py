"""The answer rules, independent of the wire protocol: a `Turn` in, an `Answer` out.

Rules, first match wins:
0. tools are offered, the tool choice forces a call and no tool ran this turn: tool calls;
1. a JSON schema is requested: an instance of it (`json_object`: a small JSON object);
2. the question is simple arithmetic: the result ("5");
3. tools are offered and none ran this turn: one call per tool (the first only if parallel calls are
   off), arguments generated from each tool's parameter schema;
4. otherwise a text that echoes the question and the contents of the tool results.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asynceval.sim._arith import solve
from asynceval.sim._schema import JsonSchema, instance

_DIGEST_CHARS = 80


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call now: its name and its JSON Schema for arguments."""

    name: str
    parameters: JsonSchema


@dataclass(frozen=True, slots=True)
class Turn:
    """What the answer rules look at in a request, whatever its protocol.

    `question` is the text of the last user message that has text; `tool_results` the tool outputs
    sent after it (non-empty means tools already ran this turn); `tools` those the tool choice still
    allows; `call_offset` counts the tool calls earlier in the conversation, so new call ids
    do not repeat them.
    """

    question: str = ""
    tool_results: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    force_tools: bool = False
    parallel_tools: bool = True
    schema: JsonSchema | None = None
    json_object: bool = False
    call_offset: int = 0


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the simulated model makes; `index` numbers it within the conversation."""

    index: int
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Answer:
    """The simulated model's reply: text, or tool calls (then `text` is None)."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()

    def chars(self) -> int:
        """Characters produced, for usage: the text, or tool names plus JSON arguments."""
        if self.text is not None:
            return len(self.text)
        return sum(len(c.name) + len(json.dumps(c.arguments)) for c in self.tool_calls)


FINAL_ANSWER = "final_answer"
"""A tool by this name (smolagents' convention) ends the agent's run: it is called alone and last,
once the other tools' results are back, or at once when it is the only tool offered."""


def answer(turn: Turn, *, salt: bytes = b"") -> Answer:
    """Apply the answer rules to `turn`; `salt` (seed and request) varies generated values."""
    offers_final = any(tool.name == FINAL_ANSWER for tool in turn.tools)
    if offers_final and (turn.tool_results or len(turn.tools) == 1):
        final = solve(turn.question) if not turn.tool_results else None
        call = ToolCall(turn.call_offset, FINAL_ANSWER, {"answer": final or text_answer(turn)})
        return Answer(None, (call,))
    may_call = bool(turn.tools) and not turn.tool_results
    if may_call and turn.force_tools:
        return Answer(None, _tool_calls(turn, salt))
    if turn.schema is not None:
        return Answer(json.dumps(instance(turn.schema, salt=salt)))
    if turn.json_object:
        return Answer(json.dumps({"answer": text_answer(turn)}))
    result = solve(turn.question)
    if result is not None:
        return Answer(result)
    if may_call:
        return Answer(None, _tool_calls(turn, salt))
    return Answer(text_answer(turn))


def text_answer(turn: Turn) -> str:
    """The rule-4 text: a digest of the question, then the tool results verbatim if any."""
    digest = " ".join(turn.question.split())
    if len(digest) > _DIGEST_CHARS:
        digest = digest[: _DIGEST_CHARS - 3] + "..."
    text = f"Simulated answer: {digest}" if digest else "Simulated answer."
    if turn.tool_results:
        text += " Tool results: " + "; ".join(turn.tool_results)
    return text


def token_count(chars: int, tokens_per_char: float) -> int:
    """Estimated tokens for `chars` characters: rounded up, at least 1."""
    return max(1, math.ceil(chars * tokens_per_char))


def text_of(content: Any) -> str:
    """The text in a message content: a string, or the `text` of a list of parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (p["text"] for p in content if isinstance(p, Mapping) and "text" in p)
        return "\n".join(str(text) for text in texts)
    return ""


def _tool_calls(turn: Turn, salt: bytes) -> tuple[ToolCall, ...]:
    tools = tuple(t for t in turn.tools if t.name != FINAL_ANSWER)  # final_answer comes last
    chosen = tools if turn.parallel_tools else tools[:1]
    calls = []
    for i, tool in enumerate(chosen):
        schema = tool.parameters or {"type": "object"}
        arguments = instance(schema, salt=salt + tool.name.encode())
        calls.append(ToolCall(turn.call_offset + i, tool.name, _as_object(arguments)))
    return tuple(calls)


def _as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
