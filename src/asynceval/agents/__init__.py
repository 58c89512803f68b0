"""Agents from sync frameworks inside the async engine (layer 8 of DESIGN section 1).

`SyncAgent` wraps any object with a blocking `run(query)` so it runs in the engine's worker threads
while its LLM calls (`model.generate_sync`) share the run's one global limit with async code.
`asynceval.agents.smolagents` (optional extra `asynceval[smolagents]`, imported only on demand)
adds `AsyncEvalModel`, a smolagents `Model` backed by an asynceval model. Imports the engine, the
models and the layers below; the edges import it.
"""

from .sync import SyncAgent

__all__ = ["SyncAgent"]
