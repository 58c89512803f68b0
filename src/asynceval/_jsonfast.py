"""JSON text for the hot paths (event lines, report lines), equal to the standard library's.

`json.JSONEncoder.encode` spends about a microsecond of Python on every call before its C
encoder starts (an `isinstance` chain, `iterencode`'s closure set-up); `encoder` builds the C
encoder directly per call, with the same options, so the text is the same byte for byte.
`scalar` renders one str/int/float/bool/None as `JSONEncoder` would (None for anything else):
event lines are assembled from such pieces without building a record at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

# The C encoder the standard library's `JSONEncoder.iterencode` builds per call (None without it).
_c_make_encoder: Callable[..., Callable[[Any, int], Any]] | None = getattr(
    json.encoder, "c_make_encoder", None
)

_INFINITY = float("inf")


def encoder(
    *,
    default: Callable[[Any], Any] | None = None,
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    sort_keys: bool = False,
) -> Callable[[Any], str]:
    """`json.JSONEncoder(default=..., ensure_ascii=..., allow_nan=..., sort_keys=...).encode`
    for dicts, without its per-call set-up (anything else goes through that method itself).
    Circular structures raise ValueError as there; without `default`, a value JSON cannot hold
    raises TypeError."""
    standard = json.JSONEncoder(
        default=default, ensure_ascii=ensure_ascii, allow_nan=allow_nan, sort_keys=sort_keys
    )
    slow, default = standard.encode, standard.default
    make = _c_make_encoder
    if make is None:  # pragma: no cover (CPython has it; other interpreters may not)
        return slow
    strings = encode_basestring_ascii if ensure_ascii else encode_basestring

    def encode(value: Any) -> str:
        if type(value) is not dict:
            return slow(value)
        return "".join(
            make({}, default, strings, None, ": ", ", ", sort_keys, False, allow_nan)(value, 0)
        )

    return encode


def scalar(value: Any) -> str | None:
    """`value` as JSON (ASCII, NaN allowed: the events' encoder) if it is exactly a str, int,
    float, bool or None; else None (the caller renders it the general way)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return float.__repr__(value)
    return None
