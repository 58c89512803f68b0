"""Agents from sync frameworks inside the async engine.

`SyncAgent` wraps any object with a blocking `run(query)` so it runs in the engine's worker threads
while its LLM calls (`model.generate_sync`) share the run's one global limit with async code.
`asynceval.agents.smolagents` (optional extra `asynceval[smolagents]`, imported only on demand)
adds `AsyncEvalModel`, a smolagents `Model` backed by an asynceval model.
"""

from .sync import SyncAgent

__all__ = ["SyncAgent"]
