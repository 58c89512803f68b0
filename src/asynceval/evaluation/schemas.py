"""The structured-output contracts of the judge panel (DESIGN section 6, seed 004).

`judicial_opinion_format` asks for one opinion on one criterion; `judicial_opinions_format` for
`{"opinions": [...]}` covering several criteria in one call. Both are OpenAI `response_format`
dicts with `strict: True`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _opinion_schema(criterion_ids: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "criterion_id": {"type": "string", "enum": list(criterion_ids)},
            "score": {"type": "number"},
            "argument": {"type": "string"},
        },
        "required": ["criterion_id", "score", "argument"],
        "additionalProperties": False,
    }


def _checked(criterion_ids: Sequence[str]) -> list[str]:
    if isinstance(criterion_ids, str):
        raise TypeError("criterion_ids must be a sequence of ids, not one string")
    ids = list(criterion_ids)
    if not ids:
        raise ValueError("criterion_ids must not be empty")
    if len(set(ids)) != len(ids):
        raise ValueError(f"criterion_ids must be distinct, got {ids}")
    return ids


def judicial_opinion_format(criterion_id: str) -> dict[str, Any]:
    """The `judicial_opinion` response_format: one opinion whose criterion_id can only be this one."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "judicial_opinion",
            "schema": _opinion_schema(_checked([criterion_id])),
            "strict": True,
        },
    }


def judicial_opinions_format(criterion_ids: Sequence[str]) -> dict[str, Any]:
    """The `judicial_opinions` response_format: `{"opinions": [opinion, ...]}`, each opinion's
    criterion_id one of `criterion_ids` (a schema cannot demand one of each: the panel checks)."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "judicial_opinions",
            "schema": {
                "type": "object",
                "properties": {
                    "opinions": {"type": "array", "items": _opinion_schema(_checked(criterion_ids))}
                },
                "required": ["opinions"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
