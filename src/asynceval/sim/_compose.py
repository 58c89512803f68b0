"""The answer to one request, apart from how it is delivered: the live routes and the batch lines
build it here, so a batch line's body is what the live endpoint answers for the same request.

An answer depends on (seed, path, body bytes) and its id on the attempt index of that body too
(`ident`); `created` is the wall-clock second it is rendered.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from asynceval.sim._answers import Answer, Turn, answer, token_count
from asynceval.sim._dialect import MAX_OUTPUT_TOKENS, Dialect, Parsed, Usage


def request_digest(path: str, body: bytes) -> bytes:
    """The 16-byte hash of a request: its path and exact body bytes."""
    return hashlib.blake2b(path.encode() + b"\0" + body, digest_size=16).digest()


def compact(document: Mapping[str, Any]) -> bytes:
    """`document` as the OpenAI and Anthropic SDKs (and httpx's `json=`) send it: compact UTF-8
    JSON, keys in their order."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def ident(digest: bytes, attempt: int) -> str:
    """The hex id of attempt `attempt` (0 first) of the request hashed `digest`."""
    return f"{digest.hex()[:24]}{attempt:04x}"


def compose(parsed: Parsed, salt: bytes, tokens_per_char: float) -> tuple[list[Answer], Usage]:
    """One answer per choice wanted and their usage; `salt` is the seed's salt plus the digest.

    Raises what the answer generator raises for a schema it cannot satisfy.
    """
    replies = _answers(parsed.turn, parsed.choices, salt)
    cap = min(parsed.max_tokens or MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS)
    usage = Usage(
        token_count(parsed.prompt_chars, tokens_per_char),
        sum(min(token_count(reply.chars(), tokens_per_char), cap) for reply in replies),
    )
    return replies, usage


def render(
    dialect: Dialect,
    parsed: Parsed,
    salt: bytes,
    digest: bytes,
    attempt: int,
    tokens_per_char: float,
) -> tuple[dict[str, Any], Usage]:
    """The whole (non-streamed) answer document and its usage, as the live route renders it."""
    replies, usage = compose(parsed, salt + digest, tokens_per_char)
    document = dialect.render(parsed, replies, ident(digest, attempt), int(time.time()), usage)
    return document, usage


def _answers(turn: Turn, choices: int, salt: bytes) -> list[Answer]:
    """One answer per choice; the first is the answer a single-choice request gets."""
    return [answer(turn, salt=salt + (b"#%d" % i if i else b"")) for i in range(choices)]
