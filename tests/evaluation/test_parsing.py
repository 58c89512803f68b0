"""The panel's contracts: the exact response_format schemas, and how answers are read."""

from __future__ import annotations

import json

import pytest

from asynceval.evaluation import (
    OpinionParseError,
    judicial_opinion_format,
    judicial_opinions_format,
)
from asynceval.evaluation.parsing import parse_lenient, parse_opinion, read_batch


def item(*ids: str) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {
            "criterion_id": {"type": "string", "enum": list(ids)},
            "score": {"type": "number"},
            "argument": {"type": "string"},
        },
        "required": ["criterion_id", "score", "argument"],
        "additionalProperties": False,
    }


def test_the_schemas_are_exactly_the_contract() -> None:
    assert judicial_opinion_format("accuracy") == {
        "type": "json_schema",
        "json_schema": {"name": "judicial_opinion", "schema": item("accuracy"), "strict": True},
    }
    assert judicial_opinions_format(["accuracy", "clarity"]) == {
        "type": "json_schema",
        "json_schema": {
            "name": "judicial_opinions",
            "schema": {
                "type": "object",
                "properties": {"opinions": {"type": "array", "items": item("accuracy", "clarity")}},
                "required": ["opinions"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
    with pytest.raises(ValueError, match="distinct"):
        judicial_opinions_format(["a", "a"])


def test_a_structured_answer_must_be_schema_valid_and_on_its_criterion() -> None:
    good = {"criterion_id": "a", "score": 4, "argument": "ok"}
    assert parse_opinion(json.dumps(good), "a") == (4.0, "ok")
    for bad in (
        "not json",
        json.dumps({**good, "criterion_id": "b"}),
        json.dumps({**good, "score": "4"}),
        json.dumps({**good, "score": True}),
        json.dumps({**good, "extra": 1}),
        json.dumps({"criterion_id": "a", "score": 4}),
        '{"criterion_id": "a", "score": NaN, "argument": "ok"}',
        json.dumps([good]),
    ):
        with pytest.raises(OpinionParseError):
            parse_opinion(bad, "a")


def test_a_plain_text_answer_is_read_leniently() -> None:
    text = 'Sure. {not json} ```json\n{"score": "3.5", "argument": "decent"}\n``` {"score": 1}'
    assert parse_lenient(text) == (3.5, "decent")
    assert parse_lenient('{"criterion_id": "x", "score": 2}') == (2.0, "")
    for bad in ("score: 4", '{"score": "high"}', '{"argument": "no score"}', "[1, 2]"):
        with pytest.raises(OpinionParseError):
            parse_lenient(bad)


def test_a_batch_keeps_valid_entries_and_names_each_discarded_one() -> None:
    entries = [
        {"criterion_id": "a", "score": 1, "argument": "x"},
        {"criterion_id": "b", "score": "bad", "argument": "x"},  # malformed, criterion known
        {"criterion_id": "zz", "score": 2, "argument": "x"},  # unknown criterion
        {"criterion_id": "a", "score": 5, "argument": "again"},  # duplicate: the first stays
        "not an object",
    ]
    reading = read_batch(json.dumps({"opinions": entries}), ["a", "b", "c"])
    assert reading.valid == {"a": (1.0, "x")}
    assert [(m.criterion_id, json.loads(m.raw)) for m in reading.malformed] == [
        ("b", entries[1]),
        (None, entries[2]),
        ("a", entries[3]),
        (None, entries[4]),
    ]
    assert "unknown criterion_id 'zz'" in reading.malformed[1].error
    assert "duplicate" in reading.malformed[2].error


@pytest.mark.parametrize("text", ['{"opinions": [', '{"opinions": {}}', "[]", ""])
def test_an_unreadable_batch_is_one_malformed_part(text: str) -> None:
    reading = read_batch(text, ["a"])
    assert reading.valid == {}
    (part,) = reading.malformed
    assert part.raw == text and part.criterion_id is None
