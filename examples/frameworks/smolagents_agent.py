"""smolagents' `OpenAIServerModel` in a `ToolCallingAgent` as a Benchmark, on asynceval's funnel.

`OpenAIServerModel` builds a sync `openai.OpenAI` client; `client_kwargs={"http_client":
asynceval.sync_http_client(agent="solver"), "max_retries": 0}` makes it send through asynceval.
The agent is sync: `SyncAgent` runs each repetition's `ToolCallingAgent.run` in one of the
engine's worker threads, and every request takes a slot of the same process-wide limit
(MAX_CONCURRENT_LLM_CALLS), is retried by the funnel (the SDK's retries are off), is logged as
queueing/acquired/released events with `agent="solver"`, and its tokens land in the repetition's
report. The prompts, the tool loop and the parsing stay smolagents'. 20 tasks ("What is 7 + 7?");
the answer counts when the agent's final answer carries the sum.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/smolagents_agent.py
    asynceval run examples/frameworks/smolagents_agent.py --max-concurrent-llm-calls 5

(`examples/smolagents_agent.py` shows the other way in: asynceval's own model behind smolagents.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SumBenchmark
from smolagents import OpenAIServerModel, ToolCallingAgent
from smolagents.monitoring import LogLevel

import asynceval
from asynceval import Runtime, SyncAgent, Task
from asynceval.interop import base_url

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def server_model() -> OpenAIServerModel:
    """smolagents' OpenAI-compatible model on asynceval's sync httpx client."""
    settings = Runtime.current().settings
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "asynceval-sim"
    return OpenAIServerModel(
        model_id=settings.llm_model or "asynceval-sim",
        api_base=base_url(),
        api_key=key,
        client_kwargs={"http_client": asynceval.sync_http_client(agent=AGENT), "max_retries": 0},
    )


class SmolagentsSums(SumBenchmark):
    """20 questions; a fresh ToolCallingAgent per repetition (agents keep memory)."""

    def __init__(self) -> None:
        super().__init__()
        self.model: OpenAIServerModel | None = None

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.model is None:  # one model (one client, one connection pool) for the run
            self.model = server_model()
        agent = ToolCallingAgent(
            tools=[], model=self.model, max_steps=3, verbosity_level=LogLevel.OFF
        )
        solver = SyncAgent(agent, name=AGENT)  # its sync run() goes to a worker thread
        return [solver], {AGENT: solver}

    def judge(self, task: Task, answer: Any) -> bool:
        """smolagents' final_answer wraps the reply: the sum must be among its numbers."""
        return task.evaluation_data["expected"] in NUMBER.findall(str(answer))


benchmark = SmolagentsSums
