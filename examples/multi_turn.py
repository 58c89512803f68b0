"""Multi-turn conversations with a simulated user, ending in every possible way (seeds 000, 002).

A calculator assistant (one model call per turn, the conversation so far as context) talks with a
simulated user for at most 3 turns (`max_invocations=3`); every task runs twice
(`n_task_repeats=2`). The user asks its questions one at a time, checks each answer against the
number it expects and then asks the next one; once all are answered it is satisfied. So the
reports show every termination reason:

- user_stop: the user got all its answers within 3 turns;
- agent_stop: the assistant ends the conversation itself when a message is not arithmetic;
- max_steps: a user with more questions than turns is cut off after the third (status stays
  success and the evaluator still runs: it finds unanswered questions);
- and a slow assistant overrunning its task's timeout (`TaskProtocol(timeout_seconds=...)`):
  with TimeoutAction.EXTEND the engine runs it once more with double the time and it finishes
  (attempts 2); with TimeoutAction.RETRY it gets the same time again, overruns again, and the
  report says task_timeout (attempts 2, no termination reason).

Tasks come from a PriorityQueue: the slow tasks have the highest priority, so they start first and
their second attempts do not stretch the end of the run. `asynceval run` calls `run(tasks)` with
no queue, so this benchmark's `run` makes PriorityQueue its default (a caller may still pass
another queue).

Runs on the embedded simulated provider (which answers simple arithmetic exactly) unless
LLM_BASE_URL / LLM_MODEL / LLM_API_KEY point elsewhere.

    asynceval run examples/multi_turn.py
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import anyio

from asynceval import Benchmark, OpenAIChatModel, PriorityQueue, Task, TaskProtocol, TimeoutAction
from asynceval.engine import TaskQueue

SYSTEM = (
    "You are a calculator assistant. Answer arithmetic questions with the number only. "
    "If a message is not an arithmetic question, say that you can only help with arithmetic."
)
DECLINE = "Sorry, I can only help with arithmetic. Goodbye!"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

TaskSource = Iterable[Task | Mapping[str, Any]]


def numbers_in(text: str) -> list[Fraction]:
    """Every number written in `text` ("12", "-3.5"), exactly."""
    return [Fraction(match) for match in NUMBER.findall(text)]


@dataclass(frozen=True)
class AgentReply:
    """One assistant turn: what it said, and whether it ended the conversation."""

    text: str
    done: bool


@dataclass(frozen=True)
class UserReply:
    """One user turn; `satisfied` ends the conversation (the default `user_is_satisfied`)."""

    text: str
    satisfied: bool


class Calculator:
    """The assistant: answers with the model, keeps the conversation, stops on an off-topic message.

    `think_s` stands for a slow backend the assistant waits on before every answer.
    """

    def __init__(self, model: OpenAIChatModel, *, think_s: float = 0.0) -> None:
        self.model = model
        self.think_s = think_s
        self.messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
        self.model_replies: list[str] = []

    async def run(self, message: str | UserReply) -> AgentReply:
        text = message.text if isinstance(message, UserReply) else message
        self.messages.append({"role": "user", "content": text})
        if self.think_s:
            await anyio.sleep(self.think_s)
        completion = await self.model.generate(self.messages, agent="calculator")
        answer = completion.text.strip()
        self.model_replies.append(answer)
        # No number in the model's reply: the message was not arithmetic, so end it here.
        reply = AgentReply(answer, done=False) if numbers_in(answer) else AgentReply(DECLINE, True)
        self.messages.append({"role": "assistant", "content": reply.text})
        return reply

    def gather_traces(self) -> dict[str, Any]:
        return {
            "messages": list(self.messages),
            "model_replies": list(self.model_replies),
            "think_s": self.think_s,
        }


class SimulatedUser:
    """Asks `questions` (dicts of "text" and "expected") in order. An answer that contains the
    expected number moves on to the next question; any other answer gets the question again.
    Satisfied once every question is answered."""

    def __init__(self, questions: Sequence[Mapping[str, Any]]) -> None:
        self.questions = list(questions)
        self.answered = 0
        self.log: list[dict[str, Any]] = []

    async def respond(self, reply: AgentReply) -> UserReply:
        question = self.questions[self.answered]
        expected = question["expected"]
        correct = expected is not None and Fraction(str(expected)) in numbers_in(reply.text)
        self.log.append({"question": question["text"], "answer": reply.text, "correct": correct})
        if not correct:
            return UserReply(f"That doesn't look right. {question['text']}", satisfied=False)
        self.answered += 1
        if self.answered == len(self.questions):
            return UserReply("Thanks, that's all I needed.", satisfied=True)
        return UserReply(f"Thanks! {self.questions[self.answered]['text']}", satisfied=False)

    def gather_traces(self) -> dict[str, Any]:
        return {"questions": len(self.questions), "answered": self.answered, "turns": self.log}


def question(a: int, op: str, b: int) -> dict[str, Any]:
    """An arithmetic question and the number it expects (computed here: the task's ground truth)."""
    x, y = Fraction(a), Fraction(b)
    value = {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op]
    expected = str(value.numerator) if value.denominator == 1 else f"{float(value):g}"
    return {"text": f"What is {a} {op} {b}?", "expected": expected}


def off_topic(text: str) -> dict[str, Any]:
    return {"text": text, "expected": None}


def conversation(
    task_id: str,
    questions: list[dict[str, Any]],
    *,
    think_s: float = 0.0,
    protocol: TaskProtocol | None = None,
) -> Task:
    return Task(
        query=questions[0]["text"],
        id=task_id,
        environment_data={"think_s": think_s},
        user_data={"questions": questions},
        evaluation_data={"off_topic": any(q["expected"] is None for q in questions)},
        protocol=protocol or TaskProtocol(),
    )


class MultiTurn(Benchmark):
    """Seven conversations, each run twice, at most 3 turns each."""

    def __init__(self) -> None:
        super().__init__(n_task_repeats=2, max_invocations=3, max_concurrent_tasks=4)
        self.model: OpenAIChatModel | None = None

    def default_tasks(self) -> list[Task]:
        slow = 0.3  # per turn: two turns take longer than the 0.6 s timeout, not than 1.2 s
        return [
            conversation("one-question", [question(17, "*", 3)]),
            conversation("two-questions", [question(12, "+", 30), question(144, "/", 12)]),
            conversation("off-topic", [off_topic("Can you book me a table for dinner tonight?")]),
            conversation(
                "drifts-off-topic",
                [question(9, "*", 9), off_topic("Now write me a poem about it.")],
            ),
            conversation(
                "too-many-questions",
                [
                    question(7, "+", 8),
                    question(90, "-", 45),
                    question(6, "*", 7),
                    question(100, "/", 8),
                ],
            ),
            conversation(
                "slow-extend",
                [question(25, "*", 4), question(81, "/", 9)],
                think_s=slow,
                protocol=TaskProtocol(
                    timeout_seconds=0.6, timeout_action=TimeoutAction.EXTEND, priority=10
                ),
            ),
            conversation(
                "slow-retry",
                [question(13, "+", 29), question(56, "/", 7)],
                think_s=slow,
                protocol=TaskProtocol(
                    timeout_seconds=0.6, timeout_action=TimeoutAction.RETRY, priority=10
                ),
            ),
        ]

    async def run(
        self,
        tasks: TaskSource | None = None,
        *,
        queue: TaskQueue | Callable[[TaskSource], TaskQueue] | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """`Benchmark.run` with PriorityQueue as the default queue."""
        return await super().run(
            tasks, queue=queue if queue is not None else PriorityQueue, **options
        )

    async def setup_user(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task
    ) -> SimulatedUser:
        return SimulatedUser(task.user_data["questions"])

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.model is None:  # built on first use, when the run's settings are known
            self.model = OpenAIChatModel(settings=self.settings)
        calculator = Calculator(self.model, think_s=float(environment["think_s"]))
        return [calculator], {"calculator": calculator}

    async def agent_is_done(self, answer: Any) -> bool:
        return isinstance(answer, AgentReply) and answer.done

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        assert isinstance(user, SimulatedUser)

        async def conversation_goal(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            """Off-topic requests should be declined; otherwise every question answered."""
            declined = isinstance(answer, AgentReply) and answer.done
            answered_all = user.answered == len(user.questions)
            passed = declined if task.evaluation_data["off_topic"] else answered_all
            return {"passed": passed, "answered": user.answered, "questions": len(user.questions)}

        return [conversation_goal]


benchmark = MultiTurn
