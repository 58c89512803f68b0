"""Reading a run back: summaries of results files and checks of event logs."""

from .logcheck import LogCheck, check_events
from .summary import Summary, summarize, wilson_interval

__all__ = ["LogCheck", "Summary", "check_events", "summarize", "wilson_interval"]
