"""A benchmark run in a subprocess by the resume tests: slow enough to be killed half way.

    python resumable_run.py RESULTS.jsonl LOG.txt [resume]

Every repetition appends "task_id repeat_idx" to LOG.txt when it starts, so the test can tell
which repetitions ran in which process.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from asynceval import Benchmark, Settings, Task


class Resumable(Benchmark):
    def __init__(self, log_path: str) -> None:
        super().__init__(
            n_task_repeats=2, max_concurrent_tasks=4, settings=Settings(log_level="ERROR")
        )
        self.log_path = log_path

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> Any:
            context_line = f"{task.id}\n"
            with open(self.log_path, "a") as log:  # noqa: ASYNC230 (a tiny test log)
                log.write(context_line)
                log.flush()
            await anyio.sleep(0.05)
            if task.metadata.get("flaky") and sys.argv[3:] != ["resume"]:
                raise RuntimeError("fails in the first process only")
            return query

        return [agent], {}


def main() -> None:
    results, log = sys.argv[1], sys.argv[2]
    tasks = [Task(query=i, id=f"task-{i}", metadata={"flaky": i % 7 == 3}) for i in range(40)]
    Resumable(log).run_sync(tasks, results_path=results, resume=sys.argv[3:] == ["resume"])


if __name__ == "__main__":
    main()
