"""Scale-out on Dask distributed (extra `asynceval[dask]`): `DaskBackend` runs a run's
repetitions on a cluster's workers under one cluster-wide LLM-call limit. Importing this
package imports `distributed`; nothing else in asynceval does."""

from ._backend import DaskBackend, pickled_benchmark

__all__ = ["DaskBackend", "pickled_benchmark"]
