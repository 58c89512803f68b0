"""Evaluation with LLM judges (layer 8 of DESIGN section 1): a panel of judge agents scoring an
answer on several dimensions.

`JudgePanel(model, agents, dimensions)` gives one `JudicialOpinion` per (agent, dimension), through
individual structured calls or, with batching, one structured call per agent; `panel.evaluator()`
plugs it into a Benchmark. `judicial_opinion_format()` and `judicial_opinions_format()` are the
response formats it asks for. Imports the engine, the models and the layers below; the edges
import it.
"""

from .._moved import moved_names
from .opinions import Dimension, JudicialOpinion, PanelResult
from .panel import JudgePanel
from .parsing import OpinionParseError
from .schemas import judicial_opinion_format, judicial_opinions_format

__all__ = [
    "Dimension",
    "JudgePanel",
    "JudicialOpinion",
    "OpinionParseError",
    "PanelResult",
    "judicial_opinion_format",
    "judicial_opinions_format",
]

_MOVED = {"refuses_structured_output": "asynceval.evaluation.panel"}
"""Plumbing that left this package's surface (one release, with a warning)."""
__getattr__ = moved_names(__name__, _MOVED, globals())
