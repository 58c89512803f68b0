"""Schema instances: every generated value validates against the schema it came from."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from asynceval.sim._schema import instance

from ._validate import errors

SCHEMAS: dict[str, dict[str, Any]] = {
    "object with all scalar types": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean"},
            "nothing": {"type": "null"},
        },
        "required": ["name", "count"],
        "additionalProperties": False,
    },
    "string bounds and formats": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 40},
            "tiny": {"type": "string", "maxLength": 3},
            "when": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
        },
    },
    "numeric bounds": {
        "type": "object",
        "properties": {
            "score": {"type": "number", "minimum": 1, "maximum": 10},
            "open": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.01},
            "pos": {"type": "integer", "exclusiveMinimum": 100},
            "neg": {"type": "integer", "maximum": -50},
            "pinned": {"type": "integer", "minimum": 7, "maximum": 7},
            "step": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.25},
            "draft4": {"type": "number", "minimum": 5, "exclusiveMinimum": True, "maximum": 6},
        },
    },
    "enum, const and type lists": {
        "type": "object",
        "properties": {
            "label": {"enum": ["yes", "no"]},
            "single": {"type": "string", "enum": ["only"]},
            "fixed": {"const": 42},
            "maybe": {"type": ["string", "null"]},
            "nullable_first": {"enum": [None, "x"]},
        },
    },
    "arrays with item bounds": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3},
            "none": {"type": "array", "items": {"type": "integer"}, "maxItems": 0},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        },
    },
    "refs to $defs and definitions, anyOf, oneOf, allOf": {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "b": {"$ref": "#/definitions/B"},
            "either": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 3}]},
            "one": {"oneOf": [{"type": "boolean"}, {"type": "string"}]},
            "both": {
                "allOf": [
                    {"type": "object", "properties": {"x": {"type": "integer"}}},
                    {"properties": {"y": {"type": "string"}}, "required": ["y"]},
                ]
            },
        },
        "$defs": {"A": {"type": "object", "properties": {"v": {"type": "number"}}}},
        "definitions": {"B": {"type": "string", "minLength": 2}},
    },
    "recursive tree": {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["label"],
            }
        },
    },
    "top-level scalar": {"type": "integer", "minimum": -3, "maximum": 3},
}


@pytest.mark.parametrize("schema", SCHEMAS.values(), ids=SCHEMAS.keys())
def test_generated_instance_validates_against_its_schema(schema: dict[str, Any]) -> None:
    for salt in (b"", b"one", b"two", b"three"):
        value = instance(schema, salt=salt)
        assert errors(value, schema) == [], value


def test_object_instances_include_every_property_not_only_required_ones() -> None:
    schema = SCHEMAS["object with all scalar types"]
    assert set(instance(schema)) == set(schema["properties"])


def test_array_of_objects_with_an_enum_property_gets_one_item_per_enum_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "opinions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "criterion_id": {"type": "string", "enum": ["a", "b", "c"]},
                        "score": {"type": "number"},
                        "argument": {"type": "string"},
                    },
                    "required": ["criterion_id", "score", "argument"],
                },
            }
        },
        "required": ["opinions"],
    }
    value = instance(schema, salt=b"x")
    assert [o["criterion_id"] for o in value["opinions"]] == ["a", "b", "c"]
    assert errors(value, schema) == []


def test_enum_items_rule_respects_max_items_and_min_items() -> None:
    item = {"type": "object", "properties": {"k": {"enum": ["a", "b", "c"]}}}
    capped = instance({"type": "array", "items": item, "maxItems": 2})
    padded = instance({"type": "array", "items": item, "minItems": 5})
    assert [o["k"] for o in capped] == ["a", "b"]
    assert [o["k"] for o in padded] == ["a", "b", "c", "a", "b"]


def test_numbers_depend_on_the_salt_and_repeat_for_the_same_salt() -> None:
    schema = {"type": "object", "properties": {f"s{i}": {"type": "number"} for i in range(8)}}
    assert instance(schema, salt=b"a") == instance(schema, salt=b"a")
    assert instance(schema, salt=b"a") != instance(schema, salt=b"b")


class Criterion(enum.Enum):
    ACCURACY = "accuracy"
    CLARITY = "clarity"
    SAFETY = "safety"


class Opinion(BaseModel):
    criterion_id: Criterion
    score: Annotated[float, Field(ge=0, le=10)]
    argument: str
    confidence: Literal["low", "high"] | None = None


class Verdict(BaseModel):
    opinions: list[Opinion]
    summary: Annotated[str, Field(min_length=5, max_length=200)]
    votes: Annotated[int, Field(gt=0, lt=4)]


def test_instance_of_a_pydantic_schema_parses_back_into_the_model() -> None:
    schema = Verdict.model_json_schema()
    verdict = Verdict.model_validate(instance(schema, salt=b"seed"))
    assert [o.criterion_id for o in verdict.opinions] == list(Criterion)
