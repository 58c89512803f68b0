"""The judges' prompts: a system message (persona, criteria, scale) and a user message (the task,
its context and the answer to judge)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .opinions import Dimension

Messages = list[dict[str, str]]


def _scale(score_range: tuple[float, float] | None) -> str:
    if score_range is None:
        return "Give a numeric score (higher is better)"
    low, high = score_range
    return f"Score on a scale from {low:g} (worst) to {high:g} (best)"


def _criterion(dimension: Dimension) -> str:
    if dimension.description:
        return f'"{dimension.id}": {dimension.description}'
    return f'"{dimension.id}"'


def system_prompt(
    judge: str,
    persona: str,
    dimensions: Sequence[Dimension],
    score_range: tuple[float, float] | None,
    *,
    json_in_text: bool = False,
) -> str:
    """Instructions for `judge` scoring one criterion, or several at once (a batched call).

    `json_in_text` asks for the JSON object in the reply itself (no structured output available).
    """
    lines = [persona.strip()] if persona.strip() else []
    lines.append(f"You are {judge}, a judge on an evaluation panel.")
    if len(dimensions) == 1:
        lines.append(f"Judge the answer on one criterion: {_criterion(dimensions[0])}.")
    else:
        lines.append("Judge the answer on each of these criteria, one opinion per criterion:")
        lines.extend(f"- {_criterion(d)}" for d in dimensions)
    lines.append(f"{_scale(score_range)} and justify each score briefly in `argument`.")
    if json_in_text:
        example = {"criterion_id": dimensions[0].id, "score": "<number>", "argument": "<why>"}
        lines.append(f"Reply with only this JSON object, nothing else: {json.dumps(example)}")
    return "\n".join(lines)


def as_text(value: Any) -> str:
    """A string as it is; anything else as JSON (or str() if it cannot be)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure
        return str(value)


def user_prompt(answer: str, *, task: Any = None, context: str = "") -> str:
    """The material to judge: the task's query (a Task's `query`, or the task itself), the
    context, and the answer; parts that are empty are left out."""
    query = getattr(task, "query", task)
    parts = []
    if query is not None and as_text(query).strip():
        parts.append(f"Task:\n{as_text(query)}")
    if context.strip():
        parts.append(f"Context:\n{context}")
    parts.append(f"Answer to judge:\n{answer}")
    return "\n\n".join(parts)


def messages(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
