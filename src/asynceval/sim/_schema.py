"""A deterministic JSON Schema instance generator for structured answers and tool arguments.

Covers what LLM structured-output schemas use: objects, arrays, strings, numbers, integers,
booleans, null, `enum`, `const`, `anyOf`/`oneOf` (first non-null option), `allOf` (merged),
`$ref` into the same document, type lists, length/item/range bounds, `multipleOf` and common
string formats. `pattern` and `not` are ignored. Values depend only on the schema, the salt and the
location inside the instance, never on generation order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

JsonSchema = Mapping[str, Any] | bool
"""A JSON Schema document or sub-schema (`true`/`false` included)."""

_FULL_DEPTH = 6
"""Below this nesting depth optional properties are dropped and arrays keep only `minItems`."""

_MAX_DEPTH = 40
"""Past this depth the generator gives up and writes null (only reached by required recursion)."""

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "email": "sim@example.com",
    "idn-email": "sim@example.com",
    "uri": "https://example.com/sim",
    "url": "https://example.com/sim",
    "iri": "https://example.com/sim",
    "uri-reference": "/sim",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "duration": "PT1S",
}

_KEYWORD_TYPES = (
    (("properties", "required", "additionalProperties"), "object"),
    (("items", "prefixItems", "minItems", "maxItems"), "array"),
    (("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"), "number"),
)


def instance(schema: JsonSchema, *, salt: bytes = b"", name: str = "") -> Any:
    """Return a JSON value (plain dicts, lists, scalars) that validates against `schema`.

    `salt` varies the numbers and booleans between requests; `name` labels generated text. The
    one-item-per-enum-value rule: an array whose items are objects with an `enum` property gets one
    item per enum value, that property set to each value in turn (clamped to minItems/maxItems).
    """
    return _Generator(schema, salt).value(schema, "$", name, 0, 0)


def unit_interval(salt: bytes, path: str) -> float:
    """A number in the open interval (0, 1) fixed by `salt` and `path`."""
    digest = hashlib.blake2b(salt + path.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 1)


class _Generator:
    """One generation pass over a schema document (holds the root for `$ref` lookups)."""

    def __init__(self, root: JsonSchema, salt: bytes) -> None:
        self._root = root
        self._salt = salt

    def resolve(self, schema: JsonSchema, depth: int = 0) -> Mapping[str, Any]:
        """`schema` with `$ref`, `allOf` and `anyOf`/`oneOf` replaced by what they choose."""
        if schema is True or depth > _MAX_DEPTH:
            return {}
        if schema is False or not isinstance(schema, Mapping):
            return {"type": "null"}
        if "$ref" in schema:
            target = self.resolve(self._lookup(str(schema["$ref"])), depth + 1)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return self.resolve({**target, **rest}, depth + 1)
        if "allOf" in schema:
            merged = _merge(
                [{k: v for k, v in schema.items() if k != "allOf"}]
                + [self.resolve(part, depth + 1) for part in schema["allOf"]]
            )
            return self.resolve(merged, depth + 1)
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                options = [self.resolve(option, depth + 1) for option in schema[key]]
                chosen = next((o for o in options if not _is_null(o)), options[0])
                rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                return {**rest, **chosen}
        return schema

    def value(self, schema: JsonSchema, path: str, name: str, index: int, depth: int) -> Any:
        """The instance for `schema` at `path` (`index` is the position inside an array)."""
        if depth > _MAX_DEPTH:
            return None
        s = self.resolve(schema)
        if "const" in s:
            return s["const"]
        if "enum" in s:
            values = list(s["enum"])
            if not values:
                return None
            non_null = [v for v in values if v is not None] or values
            return non_null[index % len(non_null)]
        kind = _type_of(s)
        if kind == "object":
            return self._object(s, path, depth)
        if kind == "array":
            return self._array(s, path, name, depth)
        if kind in ("number", "integer"):
            return _number(s, kind == "integer", unit_interval(self._salt, path))
        if kind == "boolean":
            return unit_interval(self._salt, path) < 0.5
        if kind == "null":
            return None
        return _string(s, name, index, self._salt, path)

    def _object(self, s: Mapping[str, Any], path: str, depth: int) -> dict[str, Any]:
        properties: Mapping[str, Any] = s.get("properties") or {}
        required = [str(key) for key in s.get("required") or ()]
        keys = list(properties) if depth < _FULL_DEPTH else [k for k in properties if k in required]
        out = {key: self.value(properties[key], f"{path}.{key}", key, 0, depth + 1) for key in keys}
        extra = s.get("additionalProperties")
        for key in required:
            if key not in out:
                sub: JsonSchema = extra if isinstance(extra, Mapping) else {"type": "string"}
                out[key] = self.value(sub, f"{path}.{key}", key, 0, depth + 1)
        return out

    def _array(self, s: Mapping[str, Any], path: str, name: str, depth: int) -> list[Any]:
        items: Any = s.get("items", True)
        prefix: list[Any] = list(s.get("prefixItems") or ())
        if isinstance(items, list):  # draft-04 tuple form
            prefix, items = list(items), s.get("additionalItems", True)
        key, choices = self._enum_property(items) if not prefix else (None, [])
        low = int(s.get("minItems", 0))
        if prefix:
            count = max(low, len(prefix)) if items is not False else len(prefix)
        elif choices:
            count = max(low, len(choices))
        else:
            count = low if depth >= _FULL_DEPTH else max(low, 1)
        if "maxItems" in s:
            count = min(count, int(s["maxItems"]))
        out: list[Any] = []
        for i in range(count):
            sub = prefix[i] if i < len(prefix) else items
            item = self.value(sub, f"{path}[{i}]", name, i, depth + 1)
            if key is not None and isinstance(item, dict):
                item[key] = choices[i % len(choices)]
            out.append(item)
        return out

    def _enum_property(self, items: JsonSchema) -> tuple[str | None, list[Any]]:
        """The first property of an object item schema whose schema is an enum, with its values."""
        s = self.resolve(items)
        for key, prop in (s.get("properties") or {}).items():
            resolved = self.resolve(prop)
            if "enum" in resolved:
                values = [v for v in resolved["enum"] if v is not None]
                if values:
                    return str(key), values
        return None, []

    def _lookup(self, ref: str) -> JsonSchema:
        """The sub-schema a local `#/...` JSON pointer names; anything else resolves to `{}`."""
        if not ref.startswith("#"):
            return True
        node: Any = self._root
        for raw in ref[1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return True
        return node if isinstance(node, Mapping | bool) else True


def _merge(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Shallow merge of `allOf` parts: properties united, required united, other keys last-wins."""
    merged: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    required: list[Any] = []
    for part in parts:
        for key, val in part.items():
            if key == "properties":
                properties.update(val)
            elif key == "required":
                required.extend(r for r in val if r not in required)
            else:
                merged[key] = val
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


def _is_null(s: Mapping[str, Any]) -> bool:
    kind = s.get("type")
    return kind == "null" or kind == ["null"] or ("const" in s and s["const"] is None)


def _type_of(s: Mapping[str, Any]) -> str:
    kind = s.get("type")
    if isinstance(kind, list):
        non_null = [k for k in kind if k != "null"]
        return str(non_null[0]) if non_null else "null"
    if isinstance(kind, str):
        return kind
    for keys, inferred in _KEYWORD_TYPES:
        if any(k in s for k in keys):
            return inferred
    return "string"


def _string(s: Mapping[str, Any], name: str, index: int, salt: bytes, path: str) -> str:
    fmt = s.get("format")
    if fmt == "uuid":
        digest = hashlib.blake2b(salt + path.encode(), digest_size=16).hexdigest()
        text = f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"
    elif isinstance(fmt, str) and fmt in _FORMATS:
        text = _FORMATS[fmt]
    else:
        text = f"Simulated {name}".rstrip() if name else "Simulated text"
        if index:
            text = f"{text} {index + 1}"
    low = int(s.get("minLength", 0))
    if len(text) < low:
        text = text + "x" * (low - len(text))
    if "maxLength" in s:
        text = text[: int(s["maxLength"])]
    return text


def _number(s: Mapping[str, Any], integer: bool, fraction: float) -> int | float:
    """A value inside the schema's bounds; `fraction` in (0, 1) picks where.

    Missing bounds default to [0, 10] for integers and [0, 1] for numbers, narrowed or shifted
    to fit a given bound. Bounds that admit no value give the lower bound (unsatisfiable anyway).
    """
    width = 10.0 if integer else 1.0
    low, low_open = _bound(s, "minimum", "exclusiveMinimum", max)
    high, high_open = _bound(s, "maximum", "exclusiveMaximum", min)
    if low is None:
        low = 0.0 if high is None or high > 0 else high - width
    if high is None:
        high = low + width
    step = s.get("multipleOf")
    if integer or step:
        unit = float(step) if step else 1.0
        first = math.floor(low / unit) + 1 if low_open else math.ceil(low / unit)
        last = math.ceil(high / unit) - 1 if high_open else math.floor(high / unit)
        k = min(first + int(fraction * (last - first + 1)), last) if last >= first else first
        return int(k * unit) if integer else round(k * unit, 10)
    for value in (round(low + fraction * (high - low), 2), low + fraction * (high - low)):
        if _inside(value, low, low_open, high, high_open):
            return value
    return (low + high) / 2


def _bound(
    s: Mapping[str, Any], plain: str, exclusive: str, pick: Any
) -> tuple[float | None, bool]:
    """The tightest bound from `plain` and `exclusive` (a number, or a draft-04 boolean flag)."""
    value = s.get(plain)
    flag = s.get(exclusive)
    if isinstance(flag, bool) or flag is None:
        return (None, False) if value is None else (float(value), flag is True)
    if value is None:
        return float(flag), True
    tight = float(pick(float(value), float(flag)))
    return tight, tight == float(flag)


def _inside(value: float, low: float, low_open: bool, high: float, high_open: bool) -> bool:
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    return above and below
