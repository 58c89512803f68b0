"""langchain-openai's `ChatOpenAI` as a Benchmark, on asynceval's funnel.

`ChatOpenAI` builds its own OpenAI SDK clients around the httpx clients it is given:
`http_async_client=asynceval.http_client(agent="solver")` for `ainvoke` and
`http_client=asynceval.sync_http_client(agent="solver")` for `invoke`, with `max_retries=0` (the
funnel retries). Every chat completion then takes a slot of the global limit
(MAX_CONCURRENT_LLM_CALLS), is retried by the funnel, is logged as queueing/acquired/released
events with `agent="solver"`, and its tokens land in the repetition's report. The messages and
the parsing stay langchain's. 20 tasks ("What is 7 + 7?"), judged by exact match.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/langchain_agent.py
    asynceval run examples/frameworks/langchain_agent.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SYSTEM, SumBenchmark
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

import asynceval
from asynceval import Runtime, Task
from asynceval.interop import base_url


def chat_model() -> ChatOpenAI:
    """A `ChatOpenAI` on asynceval's httpx clients: LLM_MODEL / LLM_API_KEY, else the simulator's."""
    settings = Runtime.current().settings
    key = settings.llm_api_key or SecretStr("asynceval-sim")
    return ChatOpenAI(
        model=settings.llm_model or "asynceval-sim",
        base_url=base_url(),
        api_key=key,
        max_retries=0,
        http_async_client=asynceval.http_client(agent=AGENT),
        http_client=asynceval.sync_http_client(agent=AGENT),
    )


class LangChainSums(SumBenchmark):
    """20 questions; one `ChatOpenAI.ainvoke` each."""

    def __init__(self) -> None:
        super().__init__()
        self.llm: ChatOpenAI | None = None

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.llm is None:  # one model (one connection pool) for the run
            self.llm = chat_model()
        llm = self.llm

        async def solver(query: str) -> str:
            message = await llm.ainvoke([SystemMessage(SYSTEM), HumanMessage(query)])
            return message.text.strip()

        return [solver], {AGENT: solver}


benchmark = LangChainSums
