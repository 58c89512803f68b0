"""Scale-out on Dask distributed (extra `asynceval[dask]`; layer 9 of DESIGN section 1, an edge):
`DaskBackend` runs a run's repetitions on a cluster's workers under one cluster-wide LLM-call
limit. Importing this package imports `distributed`; nothing else in asynceval does. It imports
the engine and the layers below; only the command line imports it.
"""

from .._moved import moved_names
from ._backend import DaskBackend

__all__ = ["DaskBackend"]

_MOVED = {"pickled_benchmark": "asynceval.distributed._backend"}
"""Plumbing that left this package's surface (one release, with a warning)."""
__getattr__ = moved_names(__name__, _MOVED, globals())
