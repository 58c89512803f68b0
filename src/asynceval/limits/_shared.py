"""`SharedLimit`: what a cluster backend gives a worker's `ConcurrencyController` so that its
slots are also counted against a limit shared with the other processes (see
`asynceval.distributed`)."""

from __future__ import annotations

from typing import Protocol


class SharedLimit(Protocol):
    """A limit shared with other processes (a cluster), taken after this process's own slot:
    `acquire` waits for one unit of it (cancellation leaves nothing held), `release` gives it
    back from any thread without blocking."""

    async def acquire(self) -> None: ...

    def release(self) -> None: ...

    def paused(self, endpoint: str, seconds: float) -> None:
        """This process paused `endpoint` (a 429's Retry-After): tell the others."""
        ...
