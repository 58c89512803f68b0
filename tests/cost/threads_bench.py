"""Benchmarks whose agents send their calls from threads that do not copy the context: a sync
agent fanning out through its own `ThreadPoolExecutor`, an async agent awaiting
`loop.run_in_executor(None, ...)`, and an agent whose call runs in a raw `threading.Thread`.
Each call is the OpenAI SDK's sync client on the funnel (`openai_client(sync=True)`), to the
provider and model the run is given (--base-url / LLM_BASE_URL, --model / LLM_MODEL). Used by
the command line as FILE.py:NAME and by the API directly."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asynceval import Benchmark, Task
from asynceval.interop import openai_client

QUESTION = "Describe task number {i} in one long sentence, with every detail of it you know."
"""Answered by the simulator in more than 16 tokens: a call costs about a quarter of the worst
case it reserves (its body's bytes as prompt tokens, plus max_tokens=16)."""
FAN_OUT = 4
"""The calls each repetition of `Pool` makes, at once, from its pool's threads."""


def one_call(client: Any, model: str, query: str) -> str:
    answer = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": query}], max_tokens=16
    )
    return str(answer.choices[0].message.content)


class _Threaded(Benchmark):
    n_tasks = 20

    def default_tasks(self) -> list[Task]:
        return [Task(query=QUESTION.format(i=i), id=f"t{i}") for i in range(self.n_tasks)]

    def model(self) -> str:
        return (self.settings.llm_model if self.settings else None) or "asynceval-sim"


class Pool(_Threaded):
    """A sync agent: FAN_OUT calls at once through a ThreadPoolExecutor of its own."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client, model = openai_client(sync=True), self.model()

        def agent(query: str) -> str:
            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(lambda q: one_call(client, model, q), [query] * FAN_OUT))
            return answers[-1]

        return [agent], {}


class InExecutor(_Threaded):
    """An async agent that awaits its sync call in the loop's default executor."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client, model = openai_client(sync=True), self.model()

        async def agent(query: str) -> str:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, one_call, client, model, query)

        return [agent], {}


class RawThread(_Threaded):
    """A sync agent whose call runs in a `threading.Thread` it starts (no context copied)."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client, model = openai_client(sync=True), self.model()

        def agent(query: str) -> str:
            found: list[Any] = []

            def work() -> None:
                try:
                    found.append(one_call(client, model, query))
                except Exception as exc:
                    found.append(exc)

            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
            if isinstance(found[0], Exception):
                raise found[0]
            return str(found[0])

        return [agent], {}
