"""A Dask LocalCluster for the cluster tests: worker processes, no dashboard, short leases."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import dask.config
import pytest
from distributed import LocalCluster

LEASE_TIMEOUT_S = 3.0
LEASES = {
    "distributed.scheduler.locks.lease-timeout": f"{LEASE_TIMEOUT_S}s",
    "distributed.scheduler.locks.lease-validation-interval": "0.5s",
}


def local_cluster(n_workers: int = 2, threads: int = 20) -> LocalCluster:
    """A cluster whose scheduler checks leases every 0.5 s, on its own thread and loop (for sync
    code: one started from a running loop leaves distributed's loop thread behind, which slows
    later tests; async tests use `async_local_cluster`)."""
    with dask.config.set(LEASES):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads,
            processes=True,
            dashboard_address=":0",  # no fixed port: several clusters may run
        )


@asynccontextmanager
async def async_local_cluster(n_workers: int = 2, threads: int = 20) -> AsyncIterator[LocalCluster]:
    """`local_cluster` on the running loop; the lease settings hold while its scheduler starts."""
    with dask.config.set(LEASES):
        async with LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads,
            processes=True,
            dashboard_address=":0",
            asynchronous=True,
        ) as cluster:
            yield cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Two worker processes shared by a module's tests (starting one costs seconds)."""
    with local_cluster() as cluster:
        yield cluster
