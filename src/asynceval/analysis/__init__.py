"""Reading a run back (layer 9 of DESIGN section 1, an edge): summaries of results files
(`summarize`), checks of event logs (`check_events`), `asynceval compare` and `asynceval view`
underneath. Imports the engine's results reading and the layers below; only the command line
imports it."""

from .logcheck import LogCheck, check_events
from .summary import Summary, summarize, wilson_interval

__all__ = ["LogCheck", "Summary", "check_events", "summarize", "wilson_interval"]
