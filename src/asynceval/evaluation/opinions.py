"""What a judge panel produces: one `JudicialOpinion` per (judge, criterion), and the panel's result."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict


class JudicialOpinion(BaseModel):
    """One judge's verdict on one criterion; `score` is None when the evaluation failed for good."""

    model_config = ConfigDict(frozen=True)

    agent: str
    criterion_id: str
    score: float | None
    argument: str


@dataclass(frozen=True)
class Dimension:
    """A criterion the judges score; the description (if any) goes into the judges' prompt."""

    id: str
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"a dimension id must be a non-empty string, got {self.id!r}")

    @classmethod
    def of(cls, value: str | Dimension) -> Dimension:
        """`value` itself if it is a Dimension, else a Dimension with that id."""
        return value if isinstance(value, Dimension) else cls(value)


@dataclass
class PanelResult:
    """Everything one panel evaluation produced.

    `opinions` holds exactly one opinion per (agent, dimension), ordered by agent then dimension as
    the panel was given them; `errors` one dict (agent, criterion_id, status_code, error) per
    dimension that failed for good; `calls` the LLM calls the panel made (retries inside a call
    path are not counted separately).
    """

    opinions: list[JudicialOpinion] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    def mean_score(self) -> float | None:
        """The mean of the scores that are not None, on the judges' own scale; None if none."""
        scores = [o.score for o in self.opinions if o.score is not None]
        return math.fsum(scores) / len(scores) if scores else None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values: opinions as dicts, errors and the call count."""
        return {
            "opinions": [opinion.model_dump() for opinion in self.opinions],
            "errors": [dict(error) for error in self.errors],
            "calls": self.calls,
        }


def normalised(score: float | None, score_range: tuple[float, float] | None) -> float | None:
    """`score` mapped from `score_range` onto [0, 1] (clamped: judges may stray outside the scale);
    None when either is None."""
    if score is None or score_range is None:
        return None
    low, high = score_range
    return min(1.0, max(0.0, (score - low) / (high - low)))
