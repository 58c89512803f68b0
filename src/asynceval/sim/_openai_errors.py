"""Answers of OpenAI's resource routes (files, batches): JSON documents, error bodies as OpenAI
shapes them (`{"error": {"message", "type", "param", "code"}}`), and cursor-paged lists."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from asynceval.sim._asgi import Call, Reply


def ok(document: dict[str, Any], status: int = 200) -> Reply:
    """A JSON answer."""
    return Reply(status, json.dumps(document).encode())


def error(
    status: int,
    message: str,
    param: str | None = None,
    code: str | None = None,
    kind: str = "invalid_request_error",
) -> Reply:
    """An OpenAI error answer."""
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return ok(body, status)


def invalid(message: str, param: str | None, code: str | None = None) -> Reply:
    """A 400 invalid_request_error naming the parameter to blame."""
    return error(400, message, param, code)


def not_found(message: str, param: str | None = None) -> Reply:
    """A 404 for an id the provider does not know."""
    return error(404, message, param, "not_found")


def listing(
    call: Call, items: Sequence[dict[str, Any]], *, default_limit: int = 20, cap: int = 100
) -> Reply:
    """A page of `items` (already in the list's order) as OpenAI's cursor pages are: `limit`
    (1 to `cap`) items after the one whose id is `after`; an unknown `after` gives an empty
    page, so a client paging on never loops."""
    text = call.query.get("limit")
    try:
        limit = default_limit if text is None else int(text)
    except ValueError:
        limit = 0
    if not 1 <= limit <= cap:
        return invalid(f"Invalid 'limit': expected an integer from 1 to {cap}.", "limit")
    after = call.query.get("after")
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        start = ids.index(after) + 1 if after in ids else len(items)
    page = list(items[start : start + limit])
    return ok(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": start + limit < len(items),
        }
    )
