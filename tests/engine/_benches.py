"""A benchmark shared by the engine tests: each task's metadata names what its agents do."""

from __future__ import annotations

import math
from typing import Any

import anyio
import anyio.lowlevel

from asynceval import Benchmark, Task
from asynceval.errors import AgentError


class Agents(Benchmark):
    """Each task's metadata names what its agents do."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        do = task.metadata.get("do", "answer")

        async def agent(query: Any) -> Any:
            if do == "stray_cancel":
                inner = asyncio_task_cancelled_by_itself()
                await inner  # raises CancelledError: the code's own mistake, not ours
            if do == "unencodable":
                cycle: list[Any] = []
                cycle.append(cycle)
                return {("tuple", "key"): math.nan, "cycle": cycle, "object": object()}
            await anyio.sleep(0.01)
            return f"ok {query}"

        async def failing(query: Any) -> Any:
            await anyio.lowlevel.checkpoint()
            raise AgentError("one of two agents failed")

        if do == "two_agents_one_fails":
            return [agent, failing], {}
        return [agent], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        async def keep(task: Task, answer: Any, traces: Any) -> Any:
            return {"answer": answer, "passed": True}

        return [keep]


def asyncio_task_cancelled_by_itself() -> Any:
    import asyncio

    task = asyncio.get_running_loop().create_task(asyncio.sleep(10))
    task.cancel()
    return task
