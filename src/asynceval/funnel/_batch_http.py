"""BatchHttp: the requests of one batch endpoint, sent as the live path sends its calls.

On the route's pool (the loop's client for its provider, or the embedded simulator), with the
headers that say who asks (`batch_headers`): a batch's creation is one call of the route's
gateway (one slot of MAX_CONCURRENT_LLM_CALLS, a turn in the rate windows, LLM_CALL_TIMEOUT per
attempt, retried by the retry policy, its `queueing` / `acquired` / `released` events with
agent `batch`); a look, the download of the answers and a cancel take no slot, and are retried
by the same policy, each attempt within LLM_CALL_TIMEOUT. They go from the batcher's own task,
in a context of its own (`batcher_context`).

A batch object without a status the provider documents (a server that answers every path with
a chat completion) is `NotABatch`: an error at once, not retried, whose 502 the batch's lines
fail with, instead of a batch looked at forever as still in progress.
"""

from __future__ import annotations

import contextvars
import json
from typing import TYPE_CHECKING, Any

import anyio

from .. import events
from ..errors import AttemptTimeout, ProviderError
from ._batch_wire import BatchWire, LineResult
from ._replies import check_response, provider_error, request_errors

if TYPE_CHECKING:
    import httpx

    from ._lease import Lease
    from ._route import Route

BATCH_AGENT = "batch"
"""The `agent` of a batch's creation in events (its slot is the lane's, not a caller's)."""


class NotABatch(ProviderError):
    """Raised when the provider's answer to a batch's creation or look is no batch object (see
    the module): HTTP 502 for its lines (the server behind the base URL answered nonsense), but
    never retried, since the same server answers the same way again."""

    def __init__(self, message: str, body: str | None) -> None:
        super().__init__(message, status_code=502, body=body)

    @property
    def retryable(self) -> bool:
        return False


def _batch_object(wire: BatchWire, batch: dict[str, Any]) -> dict[str, Any]:
    """`batch` when it is a batch object (an id and a known status), else `NotABatch`."""
    problem = None if isinstance(batch.get("id"), str) else "the provider's batch object has no id"
    problem = problem or wire.unknown_status(batch)
    if problem is not None:
        body = json.dumps({"error": {"message": problem, "type": "not_a_batch"}})
        raise NotABatch(problem, body)
    return batch


class BatchHttp:
    """One batch endpoint's requests (see the module)."""

    def __init__(self, route: Route, wire: BatchWire, headers: dict[str, str]) -> None:
        self.route = route
        self.wire = wire
        self.headers = headers

    async def create(self, lines: list[bytes], key: str) -> dict[str, Any]:
        """Create the batch `key` (as journaled) of `lines`: the provider's batch object (with
        its id); raises `LLMCallFailed` when the gateway gives up."""
        from ._send import send

        route = self.route
        memo = {"batch_key": key}  # and OpenAI's uploaded file, kept for a retry of the creation
        entry = await route.pools.enter(route.key, route.open_client)
        try:

            async def attempt(lease: Lease) -> dict[str, Any]:
                async def post(request: httpx.Request) -> dict[str, Any]:
                    return check_response(await send(entry.client, request, lease))

                created = await self.wire.create(post, self.headers, lines, memo)
                return _batch_object(self.wire, created)

            return await route.gateway.call(attempt, agent=BATCH_AGENT, hedge=False)
        finally:
            entry.leave()

    async def look(self, batch_id: str) -> dict[str, Any]:
        """The provider's batch object now (`NotABatch` when it is none)."""
        found = check_response(await self.fetch(self.wire.look(batch_id, self.headers)))
        return _batch_object(self.wire, found)

    async def collect(self, batch: dict[str, Any], custom_ids: list[str]) -> dict[str, LineResult]:
        """An ended batch's answers by custom_id (`custom_ids`: its lines, in order)."""
        failure = self.wire.failure(batch, custom_ids)
        if failure is not None:
            return {result.custom_id: result for result in failure}
        found: dict[str, LineResult] = {}
        for request in self.wire.result_requests(batch, self.headers):
            response = await self.fetch(request)
            for result in self.wire.results(response.content):
                found[result.custom_id] = result
        return found

    async def fetch(self, request: httpx.Request) -> httpx.Response:
        """A request about a batch (a look, its answers, a cancel): no slot, retried as a call
        is, each attempt within LLM_CALL_TIMEOUT; an error status raises `ProviderError`."""
        route = self.route
        timeout = route.gateway.call_timeout
        entry = await route.pools.enter(route.key, route.open_client)
        try:
            async for attempt in route.gateway.retry_policy.retrying():
                with attempt:
                    with anyio.move_on_after(timeout) as scope, request_errors():
                        response = await entry.client.send(request)
                    if scope.cancelled_caught:
                        raise AttemptTimeout(timeout)
                    if response.status_code >= 400:
                        raise provider_error(response)
        finally:
            entry.leave()
        return response


_KEPT = frozenset({"asynceval_run_log", "asynceval_runtime"})
"""The context variables a batcher takes from the caller that starts it: the run's events file
and the runtime bound there."""
_CALL_FIELDS = frozenset({"task_id", "repeat_idx", "agent", "dimension", "sdk_retry", "attempt"})
"""Event fields bound to one call (its repetition's, its agent's): not a batcher's."""


def batcher_context() -> contextvars.Context:
    """A batcher's task's context: a fresh one, with the caller's run (its events file, its
    runtime, the fields bound to its events, such as the run id) but nothing of the call
    itself (its repetition's usage and task context, its streams, journal, budget, task ids):
    the batcher serves every repetition, and outlives the one that started it."""
    caller = contextvars.copy_context()
    kept = [(var, value) for var, value in caller.items() if var.name in _KEPT]
    fields = {k: v for k, v in events.bound_fields().items() if k not in _CALL_FIELDS}

    def enter() -> None:
        for var, value in kept:
            var.set(value)
        events.bind_context(**fields).__enter__()  # for the task's life

    context = contextvars.Context()
    context.run(enter)
    return context
