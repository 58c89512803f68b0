"""Reading a run back (layer 9 of DESIGN section 1, an edge): summaries of results files
(`summarize`), checks of event logs (`check_events`), `asynceval compare` and `asynceval view`
underneath, and runs as tables: `from asynceval.analysis import frames` (runs, repetitions,
calls and events as Arrow tables; `asynceval export` and `asynceval sql` underneath). Imports
the engine's results reading and the layers below; only the command line imports it.

`frames` needs the `analysis` extra (pyarrow and DuckDB), which the base install lacks: it is
imported only when asked for by name, so this package imports without them."""

from .logcheck import LogCheck, check_events
from .summary import Summary, summarize, wilson_interval

__all__ = ["LogCheck", "Summary", "check_events", "summarize", "wilson_interval"]
