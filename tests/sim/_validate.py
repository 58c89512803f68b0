"""A tiny JSON Schema validator for the keywords the simulator claims to honour (test-only)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def errors(value: Any, schema: Any, root: Any = None, path: str = "$") -> list[str]:
    """Every way `value` violates `schema`, as "path: reason" strings (empty when valid)."""
    root = schema if root is None else root
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{path}: false schema"]
    assert isinstance(schema, Mapping)
    found: list[str] = []
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#").strip("/").split("/"):
            target = target[part] if part else target
        found += errors(value, target, root, path)
    if "const" in schema and value != schema["const"]:
        found.append(f"{path}: {value!r} != const {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} not in {schema['enum']!r}")
    for key in ("anyOf", "oneOf"):
        if key in schema and all(errors(value, s, root, path) for s in schema[key]):
            found.append(f"{path}: matches no option of {key}")
    for sub in schema.get("allOf", ()):
        found += errors(value, sub, root, path)
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, kind) for kind in kinds):
            return [*found, f"{path}: {value!r} is not {kinds}"]
    if isinstance(value, dict):
        found += _object(value, schema, root, path)
    elif isinstance(value, list):
        found += _array(value, schema, root, path)
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            found.append(f"{path}: shorter than minLength")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(f"{path}: longer than maxLength")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        found += _number(value, schema, path)
    return found


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def _object(value: dict[str, Any], schema: Mapping[str, Any], root: Any, path: str) -> list[str]:
    found = [f"{path}: missing {key}" for key in schema.get("required", ()) if key not in value]
    properties = schema.get("properties", {})
    for key, item in value.items():
        if key in properties:
            found += errors(item, properties[key], root, f"{path}.{key}")
        elif schema.get("additionalProperties") is False:
            found.append(f"{path}: unexpected {key}")
    return found


def _array(value: list[Any], schema: Mapping[str, Any], root: Any, path: str) -> list[str]:
    found = []
    if len(value) < schema.get("minItems", 0):
        found.append(f"{path}: fewer than minItems")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append(f"{path}: more than maxItems")
    for i, item in enumerate(value):
        found += errors(item, schema.get("items", True), root, f"{path}[{i}]")
    return found


def _number(value: float, schema: Mapping[str, Any], path: str) -> list[str]:
    checks: list[tuple[str, Callable[[float], bool]]] = [
        ("minimum", lambda b: value >= b),
        ("maximum", lambda b: value <= b),
        ("exclusiveMinimum", lambda b: value > b),
        ("exclusiveMaximum", lambda b: value < b),
        ("multipleOf", lambda b: abs(value / b - round(value / b)) < 1e-9),
    ]
    return [
        f"{path}: {value} violates {key} {schema[key]}"
        for key, ok in checks
        if key in schema and not ok(schema[key])
    ]
