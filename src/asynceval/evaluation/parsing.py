"""Reading judges' answers: strict for structured output, lenient for plain text, split for batches.

Every reader raises `OpinionParseError` (a ValueError) for what it cannot use, never anything else,
so the panel can tell an unusable answer from a bug.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import OpinionParseError as OpinionParseError

RAW_LIMIT = 4000
"""Characters of a raw payload kept in a log event (a whole batched answer can be long)."""


class _Entry(BaseModel):
    """One opinion exactly as the `judicial_opinion` schema allows it (no coercion, no extras)."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    criterion_id: str
    score: float
    argument: str


Scored = tuple[float, str]
"""(score, argument) read from an answer."""


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise OpinionParseError(f"not JSON: {exc}") from None


def _entry(data: Any) -> _Entry:
    try:
        return _Entry.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors()
        )
        raise OpinionParseError(problems) from None


def parse_opinion(text: str, criterion_id: str) -> Scored:
    """A structured `judicial_opinion` answer: valid JSON, schema-valid, about `criterion_id`."""
    entry = _entry(_load(text))
    if entry.criterion_id != criterion_id:
        raise OpinionParseError(f"answer is about {entry.criterion_id!r}, not {criterion_id!r}")
    return entry.score, entry.argument


def first_json_object(text: str) -> dict[str, Any]:
    """The first `{...}` in `text` that parses as a JSON object (prose and code fences around it
    are skipped)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            pass
        else:
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    raise OpinionParseError("no JSON object in the answer")


def parse_lenient(text: str) -> Scored:
    """A plain-text answer asked to hold a JSON opinion: the first JSON object in it, whose `score`
    is a finite number (or a numeric string); `argument` may be missing ("" then)."""
    data = first_json_object(text)
    raw_score = data.get("score")
    score: float | None = None
    if isinstance(raw_score, int | float) and not isinstance(raw_score, bool):
        score = float(raw_score)
    elif isinstance(raw_score, str):
        try:
            score = float(raw_score.strip())
        except ValueError:
            score = None
    if score is None or not math.isfinite(score):
        raise OpinionParseError(f"no numeric score in {data!r}")
    argument = data.get("argument")
    return score, argument if isinstance(argument, str) else ""


@dataclass
class Malformed:
    """A discarded part of a batched answer: its raw text, why, and its criterion if known."""

    raw: str
    error: str
    criterion_id: str | None = None


@dataclass
class BatchReading:
    """A batched answer split into usable opinions (by criterion) and discarded parts."""

    valid: dict[str, Scored] = field(default_factory=dict)
    malformed: list[Malformed] = field(default_factory=list)


def read_batch(text: str, criterion_ids: Sequence[str]) -> BatchReading:
    """Split a `judicial_opinions` answer. An entry is kept when it is schema-valid, its criterion
    is one of `criterion_ids` and no earlier entry answered that criterion; anything else is
    malformed. An answer that is not `{"opinions": [...]}` at all is one malformed part."""
    reading = BatchReading()
    try:
        data = _load(text)
        if not isinstance(data, dict) or not isinstance(data.get("opinions"), list):
            raise OpinionParseError('not an object with an "opinions" list')
    except OpinionParseError as exc:
        reading.malformed.append(Malformed(_clip(text), str(exc)))
        return reading
    wanted = set(criterion_ids)
    for item in data["opinions"]:
        raw = _clip(json.dumps(item))
        named = item.get("criterion_id") if isinstance(item, dict) else None
        criterion = named if isinstance(named, str) and named in wanted else None
        try:
            entry = _entry(item)
        except OpinionParseError as exc:
            reading.malformed.append(Malformed(raw, str(exc), criterion))
            continue
        if criterion is None:
            error = f"unknown criterion_id {entry.criterion_id!r}"
            reading.malformed.append(Malformed(raw, error))
        elif criterion in reading.valid:
            reading.malformed.append(
                Malformed(raw, f"duplicate entry for {criterion!r}", criterion)
            )
        else:
            reading.valid[criterion] = (entry.score, entry.argument)
    return reading


def _clip(text: str) -> str:
    return text if len(text) <= RAW_LIMIT else text[:RAW_LIMIT] + "...[truncated]"
