"""Chat completions streamed (`"stream": true`): the `chat.completion.chunk` frames of an answer.

Per choice: a chunk with `delta.role`, then the text in a few `delta.content` pieces, or per tool
call a chunk with its index, id, type and name, then its arguments in pieces; then a chunk with
the `finish_reason`. With `stream_options.include_usage`, every chunk carries `usage: null` and
one more chunk with no choices carries the usage. The stream ends with `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from asynceval.sim._answers import Answer
from asynceval.sim._dialect import Parsed, Usage
from asynceval.sim._sse import DONE, data_frame, pieces

Chunk = Callable[[int, dict[str, Any], str | None], bytes]
"""`chunk(choice index, delta, finish_reason)`: one frame."""


def stream(
    parsed: Parsed, answers: Sequence[Answer], ident: str, created: int, usage: Usage
) -> list[bytes]:
    """The SSE frames of the chat completion `render` would answer, in OpenAI's chunk format."""
    head: dict[str, Any] = {
        "id": f"chatcmpl-{ident}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": parsed.model,
        "system_fingerprint": None,
    }
    tail: dict[str, Any] = {"usage": None} if parsed.include_usage else {}

    def chunk(index: int, delta: dict[str, Any], finish: str | None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return data_frame({**head, "choices": [choice], **tail})

    frames: list[bytes] = []
    for index, answer in enumerate(answers):
        frames += _choice(chunk, index, answer)
    if parsed.include_usage:
        frames.append(data_frame({**head, "choices": [], "usage": usage_document(usage)}))
    frames.append(DONE)
    return frames


def usage_document(usage: Usage) -> dict[str, Any]:
    """A chat completion's `usage` object."""
    return {
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _choice(chunk: Chunk, index: int, answer: Answer) -> list[bytes]:
    """One choice's frames: role, content or tool call pieces, finish reason."""
    if not answer.tool_calls:
        frames = [chunk(index, {"role": "assistant", "content": "", "refusal": None}, None)]
        frames += [chunk(index, {"content": piece}, None) for piece in pieces(answer.text or "")]
        frames.append(chunk(index, {}, "stop"))
        return frames
    frames = [chunk(index, {"role": "assistant", "content": None, "refusal": None}, None)]
    for position, call in enumerate(answer.tool_calls):
        header = {
            "index": position,
            "id": f"call_{call.index}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        frames.append(chunk(index, {"tool_calls": [header]}, None))
        for piece in pieces(json.dumps(call.arguments)):
            delta = {"tool_calls": [{"index": position, "function": {"arguments": piece}}]}
            frames.append(chunk(index, delta, None))
    frames.append(chunk(index, {}, "tool_calls"))
    return frames
