"""The sync OpenAI SDK (`OpenAI`, chat completions) as a Benchmark, in the engine's worker threads.

`asynceval.interop.openai_client(sync=True, agent="solver")` is an `openai.OpenAI` on
`asynceval.sync_http_client()`: blocking code, as a sync agent framework's would be. `SyncAgent`
runs the solver's `run()` in one of the engine's worker threads; each request hops to the funnel
and takes a slot of the same process-wide limit (MAX_CONCURRENT_LLM_CALLS) async code uses, is
retried by the funnel (the SDK's retries are off, `max_retries=0`), is logged as
queueing/acquired/released events with `agent="solver"`, and its tokens land in the repetition's
report. 20 tasks ("What is 7 + 7?"), judged by exact match.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/openai_sdk_sync.py
    asynceval run examples/frameworks/openai_sdk_sync.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SYSTEM, SumBenchmark, model_name
from openai import OpenAI

from asynceval import SyncAgent, Task
from asynceval.interop import openai_client


class BlockingSolver:
    """Plain blocking code: one `client.chat.completions.create` per question."""

    def __init__(self, client: OpenAI, model: str) -> None:
        self.client = client
        self.model = model
        self.threads: list[str] = []

    def run(self, query: str) -> str:
        self.threads.append(threading.current_thread().name)
        completion = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": query}],
        )
        return (completion.choices[0].message.content or "").strip()

    def gather_traces(self) -> dict[str, Any]:
        return {"threads": list(self.threads)}


class OpenAISDKSync(SumBenchmark):
    """20 questions; one blocking chat completion each, from a worker thread."""

    def __init__(self) -> None:
        super().__init__()
        self.client: OpenAI | None = None

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.client is None:  # one client (one connection pool) for the whole run
            self.client = openai_client(sync=True, agent=AGENT)
        solver = SyncAgent(BlockingSolver(self.client, model_name()), name=AGENT)
        return [solver], {AGENT: solver}


benchmark = OpenAISDKSync
