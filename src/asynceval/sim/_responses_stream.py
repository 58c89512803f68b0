"""The Responses API streamed (`"stream": true`): the events that build a `response` piece by piece.

`response.created` and `response.in_progress` (the response with no output yet), then per output
item: `response.output_item.added`; for a message `response.content_part.added`, a few
`response.output_text.delta`, `response.output_text.done`, `response.content_part.done`; for a
function call a few `response.function_call_arguments.delta` and `...arguments.done`; then
`response.output_item.done`; last `response.completed` with the whole response and its usage.
Each is `event: TYPE` and `data: JSON` carrying `type` and a `sequence_number` counted from 0.
"""

from __future__ import annotations

from typing import Any

from asynceval.sim._sse import event_frame, pieces


class _Events:
    """The frames so far; `add` numbers each event in sequence."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        document = {"type": kind, "sequence_number": len(self.frames), **fields}
        self.frames.append(event_frame(kind, document))


def events(response: dict[str, Any]) -> list[bytes]:
    """The SSE frames of a completed `response` object (as the dialect renders it)."""
    out = _Events()
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    out.add("response.created", response=pending)
    out.add("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            _message(out, index, item)
        else:
            _function_call(out, index, item)
    out.add("response.completed", response=response)
    return out.frames


def _message(out: _Events, index: int, item: dict[str, Any]) -> None:
    """The events of one `message` item with one `output_text` part."""
    part = item["content"][0]
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    out.add(
        "response.output_item.added",
        output_index=index,
        item={**item, "status": "in_progress", "content": []},
    )
    out.add("response.content_part.added", **where, part={**part, "text": ""})
    for piece in pieces(part["text"]):
        out.add("response.output_text.delta", **where, delta=piece, logprobs=[])
    out.add("response.output_text.done", **where, text=part["text"], logprobs=[])
    out.add("response.content_part.done", **where, part=part)
    out.add("response.output_item.done", output_index=index, item=item)


def _function_call(out: _Events, index: int, item: dict[str, Any]) -> None:
    """The events of one `function_call` item, its arguments in pieces."""
    where = {"item_id": item["id"], "output_index": index}
    out.add(
        "response.output_item.added",
        output_index=index,
        item={**item, "arguments": "", "status": "in_progress"},
    )
    for piece in pieces(item["arguments"]):
        out.add("response.function_call_arguments.delta", **where, delta=piece)
    out.add(
        "response.function_call_arguments.done",
        **where,
        name=item["name"],
        arguments=item["arguments"],
    )
    out.add("response.output_item.done", output_index=index, item=item)
