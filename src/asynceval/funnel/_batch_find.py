"""Finding the provider's batch made for an intent whose id was never journaled (a run killed
between asking for the batch and hearing its id), so that a resumed run collects it instead of
sending its lines again (DESIGN section 16, "Nothing billed is lost").

- OpenAI: each batch carries its intent's key in its metadata (`asynceval_batch_key`): found
  by it, for certain.
- Anthropic's batches carry no metadata. A batch is taken for the intent's when it is the ONLY
  one at the provider that could be: created within `SKEW_S` before and `WINDOW_S` after the
  intent was journaled, holding exactly as many requests, and not a batch the journal knows by
  its id (the run's others) nor one matched to another intent. Its answers are then checked
  (`owns`): a batch none of whose answers bears one of the intent's custom_ids was not its
  own, and its lines are sent again. Two candidates, or none: its lines are sent again (the
  provider may bill them twice: a WARNING says so).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import ProviderError
from ._batch_wire import METADATA_KEY

if TYPE_CHECKING:
    from ._batch_http import BatchHttp
    from ._batch_journal import OpenBatch
    from ._batch_wire import BatchWire, LineResult

LIST_PAGES = 20
"""How many pages (of 100) of the provider's batches are read to find an intent with no id."""
SKEW_S = 120.0
"""How much earlier than the intent the provider's clock may date the batch made for it."""
WINDOW_S = 900.0
"""How long after its intent a batch's creation may have reached the provider (retries)."""


async def find_batch(
    http: BatchHttp, wire: BatchWire, headers: dict[str, str], batch: OpenBatch, taken: set[str]
) -> tuple[str | None, str]:
    """(the id of the provider's batch made for `batch`, how it was found: "metadata" or
    "matched"), or (None, "not_found"). `taken`: ids that are other intents' (never matched)."""
    try:
        if wire.provider == "openai":
            found = await _by_metadata(http, wire, headers, batch.batch_key)
            return (found, "metadata") if found is not None else (None, "not_found")
        if wire.provider == "anthropic":
            found = await _by_shape(http, wire, headers, batch, taken)
            return (found, "matched") if found is not None else (None, "not_found")
    except (ProviderError, ValueError):
        pass
    return None, "not_found"


def owns(batch: OpenBatch, found: dict[str, LineResult]) -> bool:
    """Whether a matched batch's answers are the intent's: one of them bears a custom_id of its
    lines (a batch whose answers are all missing is given the benefit of the doubt)."""
    return not found or any(custom_id in batch.lines for custom_id in found)


async def _by_metadata(
    http: BatchHttp, wire: BatchWire, headers: dict[str, str], key: str
) -> str | None:
    params: dict[str, Any] = {"limit": 100}
    for _ in range(LIST_PAGES):
        listed = (await http.fetch(wire._request("GET", "batches", headers, params=params))).json()
        data = listed.get("data") if isinstance(listed, dict) else None
        for item in data if isinstance(data, list) else ():
            metadata = item.get("metadata") if isinstance(item, dict) else None
            if isinstance(metadata, dict) and metadata.get(METADATA_KEY) == key:
                return str(item.get("id"))
        if not data or not listed.get("has_more"):
            return None
        params["after"] = data[-1].get("id")
    return None


async def _by_shape(
    http: BatchHttp, wire: BatchWire, headers: dict[str, str], batch: OpenBatch, taken: set[str]
) -> str | None:
    earliest, latest = batch.time - SKEW_S, batch.time + WINDOW_S
    candidates: list[str] = []
    params: dict[str, Any] = {"limit": 100}
    for _ in range(LIST_PAGES):
        request = wire._request("GET", "messages/batches", headers, params=params)
        listed = (await http.fetch(request)).json()
        data = listed.get("data") if isinstance(listed, dict) else None
        older = False
        for item in data if isinstance(data, list) else ():
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                continue
            created = _moment(item.get("created_at"))
            if created is None or created > latest:
                continue
            if created < earliest:  # newest first: the rest are older still
                older = True
                break
            counts = item.get("request_counts")
            total = sum(
                value for value in (counts.values() if isinstance(counts, dict) else ())
                if type(value) is int
            )  # fmt: skip
            if total == len(batch.lines) and item["id"] not in taken:
                candidates.append(item["id"])
        if older or not data or not listed.get("has_more"):
            break
        params["after_id"] = listed.get("last_id") or data[-1].get("id")
    return candidates[0] if len(candidates) == 1 else None


def _moment(text: Any) -> float | None:
    """An RFC 3339 time as POSIX seconds (None: not one)."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
