"""JudgePanel: several judge agents score one answer on several criteria (seed 004).

Every judge runs at once, and within a judge every criterion; the model's global concurrency
controller bounds the calls actually in flight, so the panel adds no limit of its own. Individual
mode makes one `judicial_opinion` call per (judge, criterion). Batched mode makes one
`judicial_opinions` call per judge, keeps its valid entries, logs malformed ones at WARNING
(`batch_entry_malformed`, with the raw payload) and retries every criterion left unanswered
individually. A provider that refuses structured output (HTTP 400 naming response_format) moves
the panel, for good, to individual calls that ask for JSON in the text. A criterion that still
fails gets `score=None`, the argument "Evaluation failed after {RETRY_MAX_ATTEMPTS} retries" and an
entry in `PanelResult.errors`; the others go on.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from .. import events
from ..config import Settings
from ..engine.context import current_context
from ..errors import LLMCallFailed
from ..llm.model import ChatModel
from ..llm.types import Completion
from .opinions import Dimension, JudicialOpinion, PanelResult, normalised
from .parsing import OpinionParseError, parse_lenient, parse_opinion, read_batch
from .prompts import as_text, messages, system_prompt, user_prompt
from .schemas import judicial_opinion_format, judicial_opinions_format

BATCH_DIMENSION = "batch"
"""The `dimension` a batched call is made (and logged) under."""

_REFUSAL_WORDS = ("response_format", "json_schema", "structured")


def refuses_structured_output(error: LLMCallFailed) -> bool:
    """Whether the provider refused a call for asking for structured output: HTTP 400 whose
    message names response_format, json_schema or structured output."""
    message = error.message.lower()
    return error.status_code == 400 and any(word in message for word in _REFUSAL_WORDS)


@dataclass
class _Evaluation:
    """The state of one `evaluate` call (a panel may evaluate several answers at once)."""

    user: str
    opinions: dict[tuple[str, str], JudicialOpinion] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0


def _judges(agents: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(agents, str):
        raise TypeError("agents must be a sequence of judge names or a mapping, not one string")
    personas = dict(agents) if isinstance(agents, Mapping) else dict.fromkeys(agents, "")
    if not personas:
        raise ValueError("a judge panel needs at least one agent")
    if not isinstance(agents, Mapping) and len(personas) != len(agents):
        raise ValueError(f"judge names must be distinct, got {list(agents)}")
    for name, persona in personas.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a judge name must be a non-empty string, got {name!r}")
        if not isinstance(persona, str):
            raise TypeError(f"the persona of {name!r} must be a string, got {persona!r}")
    return personas


def _dimensions(dimensions: Sequence[str | Dimension]) -> tuple[Dimension, ...]:
    if isinstance(dimensions, str):
        raise TypeError("dimensions must be a sequence of ids or Dimensions, not one string")
    out = tuple(Dimension.of(d) for d in dimensions)
    if not out:
        raise ValueError("a judge panel needs at least one dimension")
    ids = [d.id for d in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"dimension ids must be distinct, got {ids}")
    return out


def _score_range(score_range: tuple[float, float] | None) -> tuple[float, float] | None:
    if score_range is None:
        return None
    low, high = (float(v) for v in score_range)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"score_range must be two finite numbers, low < high, got {score_range}")
    return low, high


class JudgePanel:
    """A reusable evaluator: `agents` (judge names, or judge name -> persona) x `dimensions`.

    `batching` defaults to `settings.batching_enabled`, `settings` to the model's.
    `structured_output=False` is for providers known to lack it. `score_range` is the scale the
    judges are asked to use (None: unstated); `pass_threshold`, on the normalised [0, 1] scale,
    adds a "passed" verdict to `evaluator()` results.
    """

    def __init__(
        self,
        model: ChatModel,
        agents: Sequence[str] | Mapping[str, str],
        dimensions: Sequence[str | Dimension],
        *,
        batching: bool | None = None,
        settings: Settings | None = None,
        structured_output: bool | None = None,
        score_range: tuple[float, float] | None = (1, 5),
        pass_threshold: float | None = None,
    ) -> None:
        self.model = model
        self.settings = settings if settings is not None else model.settings
        self._personas = _judges(agents)
        self._dimensions = _dimensions(dimensions)
        self.batching = self.settings.batching_enabled if batching is None else batching
        # Default: what the model says of its provider (ChatModel(structured_output=False)).
        self._structured = (
            model.structured_output if structured_output is None else structured_output
        )
        self.score_range = _score_range(score_range)
        if pass_threshold is not None:
            if self.score_range is None:
                raise ValueError("pass_threshold needs a score_range to normalise scores with")
            if not 0.0 <= pass_threshold <= 1.0:
                raise ValueError(f"pass_threshold must be in [0, 1], got {pass_threshold}")
        self.pass_threshold = pass_threshold

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(self._personas)

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        return self._dimensions

    @property
    def structured_output(self) -> bool:
        """Whether calls still ask for structured output (False once the provider refused it)."""
        return self._structured

    @property
    def failure_argument(self) -> str:
        return f"Evaluation failed after {self.settings.retry_max_attempts} retries"

    # --- evaluating ------------------------------------------------------------------------

    async def evaluate(self, answer: str, *, task: Any = None, context: str = "") -> PanelResult:
        """Every judge's opinion on every dimension of `answer`; never raises for a failed call.

        `task` (a Task, whose query is shown, or any value) and `context` go into the prompt.
        """
        run = _Evaluation(user=user_prompt(answer, task=task, context=context))
        async with anyio.create_task_group() as tg:
            for agent in self._personas:
                tg.start_soon(self._judge, run, agent)
        keys = [(agent, d.id) for agent in self._personas for d in self._dimensions]
        order = {key: index for index, key in enumerate(keys)}
        errors = sorted(run.errors, key=lambda e: order[(e["agent"], e["criterion_id"])])
        return PanelResult([run.opinions[key] for key in keys], errors, run.calls)

    def summarise(self, result: PanelResult) -> dict[str, Any]:
        """An evaluator entry: the result's dict plus "score" (the mean of the non-None scores,
        each normalised onto [0, 1] from `score_range`; None without scores or range) and, with a
        `pass_threshold`, "passed" (False when there is no score)."""
        scores = [normalised(o.score, self.score_range) for o in result.opinions]
        known = [s for s in scores if s is not None]
        score = math.fsum(known) / len(known) if known else None
        entry: dict[str, Any] = {**result.as_dict(), "score": score}
        if self.pass_threshold is not None:
            entry["passed"] = score is not None and score >= self.pass_threshold
        return entry

    def evaluator(self, name: str = "judge_panel") -> Callable[..., Awaitable[dict[str, Any]]]:
        """An engine evaluator, called as `evaluator(task=..., answer=..., traces=...)`: the panel
        judges the answer (a non-string answer is shown as JSON) and returns `summarise(result)`."""

        async def judge_panel(*, task: Any = None, answer: Any = None, traces: Any = None) -> Any:
            text = "" if answer is None else as_text(answer)
            return {"evaluator": name, **self.summarise(await self.evaluate(text, task=task))}

        judge_panel.__name__ = judge_panel.__qualname__ = name
        return judge_panel

    # --- one judge -------------------------------------------------------------------------

    async def _judge(self, run: _Evaluation, agent: str) -> None:
        pending = self._dimensions
        if self.batching and self._structured:
            pending = await self._batched(run, agent)
        if len(pending) == 1:
            await self._individual(run, agent, pending[0])
        elif pending:
            async with anyio.create_task_group() as tg:
                for dimension in pending:
                    tg.start_soon(self._individual, run, agent, dimension)

    async def _batched(self, run: _Evaluation, agent: str) -> tuple[Dimension, ...]:
        """One call for all of `agent`'s dimensions; returns those still to judge one by one."""
        ids = [d.id for d in self._dimensions]
        system = system_prompt(agent, self._personas[agent], self._dimensions, self.score_range)
        try:
            completion = await self._call(
                run, agent, BATCH_DIMENSION, system, judicial_opinions_format(ids)
            )
        except LLMCallFailed as exc:
            if refuses_structured_output(exc):
                self._fall_back(agent, exc)
            return self._dimensions  # the gateway logged the failure; try them one by one
        reading = read_batch(completion.text, ids)
        for bad in reading.malformed:
            events.batch_entry_malformed(
                agent=agent,
                dimension=bad.criterion_id,
                raw=bad.raw,
                error=bad.error,
            )
        for criterion, (score, argument) in reading.valid.items():
            run.opinions[(agent, criterion)] = JudicialOpinion(
                agent=agent, criterion_id=criterion, score=score, argument=argument
            )
        pending = tuple(d for d in self._dimensions if d.id not in reading.valid)
        malformed = {bad.criterion_id for bad in reading.malformed}
        missing = [d.id for d in pending if d.id not in malformed]
        if missing:
            events.batch_entries_missing(agent=agent, dimensions=missing)
        return pending

    async def _individual(self, run: _Evaluation, agent: str, dimension: Dimension) -> None:
        """One call for one dimension (structured unless the panel fell back); records the
        opinion, or the failure."""
        persona = self._personas[agent]
        try:
            if self._structured:
                system = system_prompt(agent, persona, [dimension], self.score_range)
                try:
                    completion = await self._call(
                        run, agent, dimension.id, system, judicial_opinion_format(dimension.id)
                    )
                except LLMCallFailed as exc:
                    if not refuses_structured_output(exc):
                        raise
                    self._fall_back(agent, exc)
                else:
                    score, argument = parse_opinion(completion.text, dimension.id)
                    self._record(run, agent, dimension, score, argument)
                    return
            system = system_prompt(agent, persona, [dimension], self.score_range, json_in_text=True)
            completion = await self._call(run, agent, dimension.id, system, None)
            score, argument = parse_lenient(completion.text)
        except LLMCallFailed as exc:
            self._fail(run, agent, dimension, exc.status_code, str(exc))
            context = current_context()
            if context is not None:  # the repetition is incomplete, as if its agent's call failed
                context.record_failed_call(exc)
        except OpinionParseError as exc:
            self._fail(run, agent, dimension, None, f"unusable answer: {exc}")
        else:
            self._record(run, agent, dimension, score, argument)

    async def _call(
        self,
        run: _Evaluation,
        agent: str,
        dimension: str,
        system: str,
        response_format: Mapping[str, Any] | None,
    ) -> Completion:
        run.calls += 1
        return await self.model.generate(
            messages(system, run.user),
            agent=agent,
            dimension=dimension,
            response_format=response_format,
        )

    # --- bookkeeping -----------------------------------------------------------------------

    def _record(
        self, run: _Evaluation, agent: str, dimension: Dimension, score: float, argument: str
    ) -> None:
        run.opinions[(agent, dimension.id)] = JudicialOpinion(
            agent=agent, criterion_id=dimension.id, score=score, argument=argument
        )

    def _fail(
        self,
        run: _Evaluation,
        agent: str,
        dimension: Dimension,
        status_code: int | None,
        error: str,
    ) -> None:
        run.opinions[(agent, dimension.id)] = JudicialOpinion(
            agent=agent, criterion_id=dimension.id, score=None, argument=self.failure_argument
        )
        entry = {
            "agent": agent,
            "criterion_id": dimension.id,
            "status_code": status_code,
            "error": error,
        }
        run.errors.append(entry)
        events.judge_dimension_failed(
            agent=agent,
            dimension=dimension.id,
            status_code=status_code,
            error=error,
        )

    def _fall_back(self, agent: str, error: LLMCallFailed) -> None:
        """Stop asking for structured output, for the rest of the panel's life (logged once)."""
        if self._structured:
            self._structured = False
            events.structured_output_fallback(
                agent=agent,
                status_code=error.status_code,
                error=error.message,
            )

    def __repr__(self) -> str:
        return (
            f"JudgePanel(agents={list(self._personas)}, "
            f"dimensions={[d.id for d in self._dimensions]}, batching={self.batching}, "
            f"structured_output={self._structured})"
        )
