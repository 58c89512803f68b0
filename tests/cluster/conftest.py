"""A Dask LocalCluster for the cluster tests: worker processes, no dashboard, short leases."""

from __future__ import annotations

from collections.abc import Iterator

import dask.config
import pytest
from distributed import LocalCluster

LEASE_TIMEOUT_S = 3.0
LEASES = {
    "distributed.scheduler.locks.lease-timeout": f"{LEASE_TIMEOUT_S}s",
    "distributed.scheduler.locks.lease-validation-interval": "0.5s",
}


def local_cluster(n_workers: int = 2, threads: int = 20) -> LocalCluster:
    """A cluster whose scheduler checks leases every 0.5 s (its own thread and loop)."""
    with dask.config.set(LEASES):
        return LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads,
            processes=True,
            dashboard_address=":0",  # no fixed port: several clusters may run
        )


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """Two worker processes shared by a module's tests (starting one costs seconds)."""
    with local_cluster() as cluster:
        yield cluster
