"""Reading an OpenAI batch input file: each line's `custom_id` and body, or the errors that
fail the batch, as OpenAI's batch `errors` give them (`{"code", "message", "param", "line"}`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

MAX_LINES = 50_000
"""The most requests a batch input file may hold."""


def batch_error(
    code: str, message: str, line: int | None = None, param: str | None = None
) -> dict[str, Any]:
    """One of a failed batch's `errors`."""
    return {"code": code, "message": message, "param": param, "line": line}


class Input(NamedTuple):
    """An input file read: the (custom_id, body) of each good line, the errors that fail the
    batch (none if it may go ahead), and how many lines (requests) it holds, good or not."""

    entries: list[tuple[str, Mapping[str, Any]]]
    errors: list[dict[str, Any]]
    lines: int


def read_input(data: bytes, endpoint: str) -> Input:
    """Read an input file for a batch to `endpoint`; blank lines are skipped."""
    rows = [
        (number, text)
        for number, text in enumerate(data.decode("utf-8", "replace").splitlines(), 1)
        if text.strip()
    ]
    if not rows:
        return Input([], [batch_error("empty_file", "The batch input file is empty.")], 0)
    if len(rows) > MAX_LINES:
        message = f"The batch input file has {len(rows)} requests; at most {MAX_LINES} fit."
        return Input([], [batch_error("too_many_requests", message)], len(rows))
    entries: list[tuple[str, Mapping[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    model: Any = None
    for number, text in rows:
        problem = _check(text, endpoint, seen, model)
        if isinstance(problem, dict):
            errors.append({**problem, "line": number})
            continue
        custom_id, body = problem
        seen.add(custom_id)
        model = body.get("model") if model is None else model
        entries.append((custom_id, body))
    return Input(entries, errors, len(rows))


def _check(
    text: str, endpoint: str, seen: set[str], model: Any
) -> dict[str, Any] | tuple[str, Mapping[str, Any]]:
    """A line's (custom_id, body), or the error that refuses it (its line number left out)."""
    try:
        request = json.loads(text)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        return batch_error("invalid_json_line", "This line is not parseable as valid JSON.")
    for name, kind in (("custom_id", str), ("method", str), ("url", str), ("body", dict)):
        if not isinstance(request.get(name), kind) or request[name] == "":
            message = f"Missing required parameter: '{name}'."
            return batch_error("missing_required_parameter", message, param=name)
    custom_id, body = request["custom_id"], request["body"]
    if request["method"] != "POST":
        message = "The HTTP method of a batch request must be POST."
        return batch_error("invalid_method", message, param="method")
    if request["url"] != endpoint:
        message = f"The URL of this request does not match the batch endpoint {endpoint}."
        return batch_error("invalid_url", message, param="url")
    if custom_id in seen:
        message = (
            "The custom_id for this request is a duplicate of another request. "
            "The custom_id parameter must be unique for each request in a batch."
        )
        return batch_error("duplicate_custom_id", message, param="custom_id")
    if model is not None and body.get("model") != model:
        message = (
            f"The provided model {body.get('model')!r} does not match the model of the other "
            f"requests in the file ({model!r}): a batch holds requests for one model."
        )
        return batch_error("mismatched_model", message, param="body.model")
    return custom_id, body
