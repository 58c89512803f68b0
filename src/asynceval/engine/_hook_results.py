"""What the benchmark's setup hooks give a repetition, read: its agents (to run, and by name) and
the parts whose traces and configs the registry gathers without being told."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def split_agents(agents: Any) -> tuple[list[Any], dict[str, Any]]:
    """setup_agents may return (agents_to_run, agents_by_name), a dict by name, or a list."""
    if isinstance(agents, tuple) and len(agents) == 2:
        to_run, by_name = agents
        return list(to_run), dict(by_name)
    if isinstance(agents, Mapping):
        return list(agents.values()), dict(agents)
    if isinstance(agents, list):
        return agents, {f"agent_{index}": agent for index, agent in enumerate(agents)}
    raise TypeError(
        "setup_agents must return (agents_to_run, agents_by_name), a dict of agents by name, "
        f"or a list of agents; got {type(agents).__name__}"
    )


def auto_register(
    registry: Any, environment: Any, user: Any, agents_by_name: Mapping[str, Any]
) -> None:
    """Register the repetition's traceable parts the benchmark did not register itself."""
    parts = [("environment", "environment", environment), ("user", "user", user)]
    parts += [("agents", name, agent) for name, agent in agents_by_name.items()]
    for category, name, component in parts:
        # hasattr, not isinstance on the Protocols: a runtime Protocol check is slow per call.
        if (
            component is not None
            and (hasattr(component, "gather_traces") or hasattr(component, "gather_config"))
            and not registry.is_registered(component)
        ):
            registry.register(category, name, component)
