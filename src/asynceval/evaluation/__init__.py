"""Evaluation with LLM judges: a panel of judge agents scoring an answer on several dimensions.

`JudgePanel(model, agents, dimensions)` gives one `JudicialOpinion` per (agent, dimension), through
individual structured calls or, with batching, one structured call per agent; `panel.evaluator()`
plugs it into a Benchmark.
"""

from .opinions import Dimension, JudicialOpinion, PanelResult
from .panel import JudgePanel, refuses_structured_output
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
    "refuses_structured_output",
]
