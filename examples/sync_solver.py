"""A plain sync solver making several model calls per task, under a rate limit (seed 003).

`ChainSolver` is ordinary blocking code, as a sync agent framework's would be: no async anywhere
in it. For "Start with 12, add 7, multiply by 3, then subtract 5." it decomposes the instruction
into steps, asks the model for each step ("What is 12 + 7?"), then checks the result by asking the
model to undo the last step: four `model.generate_sync` calls. The engine runs each solver in one of
its worker threads (the solver records the thread of every call); each call hops back to the event
loop and goes through the same rate limiter and concurrency limit as async code would.

The run is held to 200 requests per minute, unless LLM_REQUESTS_PER_MINUTE says otherwise: no
window of 60 s, the first one included, sees more requests than that. The budget starts full and
each request's share comes back 60 s after it was sent, so the 32 tasks' 128 calls go at once;
with a limit of 100, the last 28 wait for the first minute's shares to come back (about 60 s).

    asynceval run examples/sync_solver.py
    LLM_REQUESTS_PER_MINUTE=100 asynceval run examples/sync_solver.py   # the last calls wait

Runs on the embedded simulated provider (which answers simple arithmetic exactly) unless
LLM_BASE_URL / LLM_MODEL / LLM_API_KEY point elsewhere.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from asynceval import Benchmark, ChatModel, OpenAIChatModel, Settings, Task
from asynceval.errors import AgentError

REQUESTS_PER_MINUTE = 200
N_TASKS = 32

SYSTEM = "Answer with the number only."
START = re.compile(r"start with (-?\d+)", re.IGNORECASE)
STEP = re.compile(r"(add|subtract|multiply by|divide by) (-?\d+)", re.IGNORECASE)
SYMBOLS = {"add": "+", "subtract": "-", "multiply by": "*", "divide by": "/"}
INVERSE = {"+": "-", "-": "+", "*": "/", "/": "*"}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def show(value: Fraction) -> str:
    """A number as the model would write it: "57", "2.5"."""
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


class ChainSolver:
    """Solves a chain of operations step by step with a model, then checks the last step."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.calls: list[dict[str, Any]] = []
        self.verified: bool | None = None

    def run(self, query: str) -> str:
        start, steps = self.decompose(query)
        values = [start]
        for symbol, operand in steps:
            values.append(self.ask(f"What is {show(values[-1])} {symbol} {show(operand)}?"))
        symbol, operand = steps[-1]
        undone = self.ask(f"What is {show(values[-1])} {INVERSE[symbol]} {show(operand)}?")
        self.verified = undone == values[-2]
        return show(values[-1])

    def decompose(self, query: str) -> tuple[Fraction, list[tuple[str, Fraction]]]:
        """The starting number and the (operator, operand) steps of the instruction."""
        start = START.search(query)
        steps = [(SYMBOLS[op.lower()], Fraction(n)) for op, n in STEP.findall(query)]
        if start is None or not steps:
            raise AgentError(f"cannot read the steps of {query!r}")
        return Fraction(start.group(1)), steps

    def ask(self, question: str) -> Fraction:
        """One model call (blocking); the number in its answer."""
        completion = self.model.generate_sync(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            agent="solver",
        )
        self.calls.append(
            {
                "question": question,
                "answer": completion.text,
                "thread": threading.current_thread().name,
            }
        )
        found = NUMBER.search(completion.text)
        if found is None:
            raise AgentError(f"no number in the answer to {question!r}: {completion.text!r}")
        return Fraction(found.group())

    def gather_traces(self) -> dict[str, Any]:
        return {
            "calls": list(self.calls),
            "threads": sorted({call["thread"] for call in self.calls}),
            "verified": self.verified,
        }


def chain_task(index: int) -> Task:
    """A three-step chain; the expected result is computed here, as the task's ground truth."""
    start, add, times, minus = 3 + index, 2 + index % 5, 2 + index % 4, 1 + index % 7
    return Task(
        query=f"Start with {start}, add {add}, multiply by {times}, then subtract {minus}.",
        id=f"chain-{index:02d}",
        evaluation_data={"expected": show(Fraction((start + add) * times - minus))},
    )


def settings_with_rate_limit() -> Settings:
    """The environment's settings, with REQUESTS_PER_MINUTE unless it sets its own limit."""
    settings = Settings()
    if settings.llm_requests_per_minute is None:
        settings = Settings(llm_requests_per_minute=REQUESTS_PER_MINUTE)
    return settings


class SyncSolver(Benchmark):
    """32 chains, each solved in a worker thread with four blocking model calls."""

    def __init__(self) -> None:
        super().__init__(settings=settings_with_rate_limit())
        self.model: OpenAIChatModel | None = None

    def default_tasks(self) -> list[Task]:
        return [chain_task(index) for index in range(N_TASKS)]

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.model is None:  # built on first use, when the run's settings are known
            self.model = OpenAIChatModel(settings=self.settings)
        solver = ChainSolver(self.model)  # its sync run() goes to a worker thread
        return [solver], {"solver": solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        solver = agents_by_name["solver"]
        assert isinstance(solver, ChainSolver)

        async def exact_match(task: Task, answer: str, traces: Any) -> dict[str, Any]:
            expected = task.evaluation_data["expected"]
            return {"passed": answer == expected, "answer": answer, "verified": solver.verified}

        return [exact_match]


benchmark = SyncSolver
