"""What a provider's reply means to the funnel: an error status as a `ProviderError` (with the
provider's own words and its Retry-After), a 2xx as its JSON body or a `MalformedResponse`, and
what the HTTP clients raise as `ProviderConnectionError`. Every one of them is retried or not by
the gateway's policy alone."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any, Protocol

from ..errors import MalformedResponse, ProviderConnectionError, ProviderError, RateLimited
from ..limits import finite_number, read_rate_headers


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the provider asks us to wait: `retry-after-ms`, else `Retry-After` in seconds or as
    an HTTP date. None when absent or unreadable; never negative."""
    millis = finite_number(headers.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    seconds = finite_number(value)
    if seconds is not None:
        return max(0.0, seconds)
    import email.utils  # rare (a date, not seconds): not at `import asynceval`

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Reply(Protocol):
    """What the error mapping reads from an answer: an `httpx.Response`, or the embedded
    simulator's in-process `SimReply`."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...


def _text(reply: Reply) -> str:
    return reply.content.decode("utf-8", "replace")


def _error_message(reply: Reply) -> str:
    """The provider's own words from an error body (OpenAI and Anthropic shapes), else the text."""
    text = _text(reply)
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500] or _reason(reply.status_code)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return text[:500]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def provider_error(reply: Reply) -> ProviderError:
    """The `ProviderError` (`RateLimited` for a 429) an error answer stands for.

    A 429 whose rate-limit headers say a budget is spent is marked `budget_empty` (a rate
    refusal). Its `retry_after` is the provider's Retry-After only: the time until the budget is
    whole again pauses the endpoint (`asynceval.funnel._signals`), and the call sent again waits
    that pause out in line, which a success meanwhile ends; a sleep of its own would not."""
    status = reply.status_code
    retry_after = parse_retry_after(reply.headers)
    if status != 429:
        return ProviderError(
            _error_message(reply),
            status_code=status,
            retry_after=retry_after,
            body=_text(reply)[:2000],
        )
    said = read_rate_headers(reply.headers)
    empty = said is not None and said.empty
    return RateLimited(
        _error_message(reply),
        status_code=status,
        retry_after=retry_after,
        body=_text(reply)[:2000],
        budget_empty=empty,
    )


def check_response(reply: Reply) -> dict[str, Any]:
    """The JSON body of a successful answer, or the matching `ProviderError` raised."""
    status = reply.status_code
    if status >= 400:
        raise provider_error(reply)
    try:
        body = json.loads(reply.content)
    except ValueError as exc:
        raise MalformedResponse(
            f"HTTP {status} with a body that is not JSON ({exc})",
            status_code=status,
            body=_text(reply)[:2000],
        ) from None
    if not isinstance(body, dict):
        raise MalformedResponse(
            f"HTTP {status} with a JSON body that is not an object", status_code=status
        )
    return body


def parse_or_malformed(body: dict[str, Any], parse: Callable[[dict[str, Any]], Any]) -> Any:
    """Run a provider's body parser, turning a missing or mistyped field into MalformedResponse."""
    try:
        return parse(body)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise MalformedResponse(
            f"completion body lacks an expected field ({type(exc).__name__}: {exc})",
            body=json.dumps(body)[:2000],
        ) from None


@contextmanager
def request_errors() -> Iterator[None]:
    """Around sending a request: what httpx or aiohttp raise, as the funnel's errors (retried)."""
    try:
        yield
    except Exception as exc:
        # httpx is imported once a pool uses it (not by `import asynceval`); if it is not
        # loaded, none of its errors can come.
        httpx = sys.modules.get("httpx")
        if httpx is not None:
            if isinstance(exc, httpx.DecodingError):
                raise MalformedResponse(f"undecodable body: {exc}") from exc
            if isinstance(exc, httpx.RequestError):
                raise ProviderConnectionError(_connection_failure(exc)) from exc
        # aiohttp errors the httpx-aiohttp transport does not translate (a garbled status line
        # or header) are connection-level failures too; the same holds for its import.
        aiohttp = sys.modules.get("aiohttp")
        if aiohttp is not None and isinstance(exc, aiohttp.ClientError):
            raise ProviderConnectionError(_connection_failure(exc)) from exc
        raise


def _connection_failure(exc: Exception) -> str:
    """`Type: message` for a failure to reach the provider, named for what happened: a refused
    connection is `ConnectError: connection refused`, although httpx-aiohttp raises every
    aiohttp connection error, refusals included, as `httpx.ConnectTimeout`."""
    name = type(exc).__name__
    aiohttp = sys.modules.get("aiohttp")
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:  # the OS's error, under the wrappers
        if isinstance(cause, ConnectionRefusedError):
            return f"ConnectError: connection refused ({exc})"
        if aiohttp is not None and isinstance(cause, aiohttp.ClientConnectorError):
            name = "ConnectError"  # could not connect; a timeout would be ServerTimeoutError
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return f"{name}: {exc}"
