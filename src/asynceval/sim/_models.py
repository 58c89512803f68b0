"""`GET /v1/models` and `GET /v1/models/{id}`: the model list OpenAI clients may ask for.

The simulator answers whatever model a request names, so any id is "found"; the list holds its
own id, `MODEL_ID`. These routes are metadata, not completions: they bypass the caps and faults
and are not counted in `/stats`.
"""

from __future__ import annotations

from typing import Any

MODEL_ID = "asynceval-sim"
"""The id `GET /v1/models` lists (any other model name is accepted too)."""

MODELS_PATH = "/v1/models"


def model(ident: str) -> dict[str, Any]:
    """A `model` object for `ident`."""
    return {"id": ident, "object": "model", "created": 0, "owned_by": "asynceval"}


def model_list() -> dict[str, Any]:
    """The `GET /v1/models` document: a list holding the simulator's model."""
    return {"object": "list", "data": [model(MODEL_ID)]}


def model_route(path: str) -> dict[str, Any] | None:
    """The document for a GET of `path` under /v1/models, or None for another path."""
    if path == MODELS_PATH:
        return model_list()
    prefix = MODELS_PATH + "/"
    if path.startswith(prefix) and len(path) > len(prefix):
        return model(path[len(prefix) :])
    return None
