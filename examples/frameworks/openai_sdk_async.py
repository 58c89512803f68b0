"""The OpenAI SDK (`AsyncOpenAI`, chat completions) as a Benchmark, on asynceval's funnel.

`asynceval.interop.openai_client(agent="solver")` is an `AsyncOpenAI` whose HTTP client is
asynceval's: every request the SDK sends takes a slot of the global limit
(MAX_CONCURRENT_LLM_CALLS), is retried by the funnel on 408/429/502/503 (the SDK's own retries are
off, `max_retries=0`), is logged as queueing/acquired/released events with `agent="solver"`, and its
tokens land in the repetition's report. 20 tasks ("What is 7 + 7?"), judged by exact match.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/openai_sdk_async.py
    asynceval run examples/frameworks/openai_sdk_async.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SYSTEM, SumBenchmark, model_name
from openai import AsyncOpenAI

from asynceval import Task
from asynceval.interop import openai_client


class OpenAISDKAsync(SumBenchmark):
    """20 questions; one chat completion each, sent by `AsyncOpenAI`."""

    def __init__(self) -> None:
        super().__init__()
        self.client: AsyncOpenAI | None = None

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.client is None:  # one client (one connection pool) for the whole run
            self.client = openai_client(agent=AGENT)
        client = self.client
        model = model_name()

        async def solver(query: str) -> str:
            completion = await client.chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": query},
                ],
            )
            return (completion.choices[0].message.content or "").strip()

        return [solver], {AGENT: solver}


benchmark = OpenAISDKAsync
