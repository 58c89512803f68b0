"""Tool: a callable an agent's model may ask for, with the resources it reads and writes.

The declarations drive `ToolExecutor`'s scheduling: calls that touch disjoint resources (or only
read) may run together. A tool that is not read-only and declares nothing is taken to write
everything, so it always runs alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def _resources(kind: str, names: Iterable[str]) -> frozenset[str]:
    """The resource names as a set; a single string is one name, not its characters."""
    if isinstance(names, str):
        names = (names,)
    out = frozenset(names)
    for name in out:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind} must name resources as non-empty strings, got {name!r}")
    return out


@dataclass(frozen=True, init=False, eq=False)
class Tool:
    """A named callable (`def` or `async def`, called with the tool call's arguments as keywords).

    `reads` and `writes` name the resources it touches. A `read_only` tool declaring no resources
    reads nothing anyone writes; it may not declare `writes` (ValueError). A tool that is neither
    read-only nor declares any resource is `exclusive`: it conflicts with every other call.
    `parameters` is the JSON schema of its arguments, for `openai_schema`.
    """

    name: str
    fn: Callable[..., Any]
    read_only: bool
    reads: frozenset[str]
    writes: frozenset[str]
    description: str
    parameters: Mapping[str, Any] | None

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        read_only: bool = False,
        reads: Iterable[str] = (),
        writes: Iterable[str] = (),
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool needs a non-empty name, got {name!r}")
        if not callable(fn):
            raise TypeError(f"tool {name!r}: fn must be callable, got {fn!r}")
        read_set = _resources("reads", reads)
        write_set = _resources("writes", writes)
        if read_only and write_set:
            raise ValueError(f"tool {name!r} is read_only but declares writes {sorted(write_set)}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "read_only", bool(read_only))
        object.__setattr__(self, "reads", read_set)
        object.__setattr__(self, "writes", write_set)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "parameters", parameters)

    @property
    def exclusive(self) -> bool:
        """Whether it is treated as writing everything (not read-only, no resources declared)."""
        return not self.read_only and not self.reads and not self.writes

    def shared_resources(self, other: Tool) -> frozenset[str]:
        """The resources one of the two writes and the other reads or writes."""
        return (self.writes & (other.reads | other.writes)) | (other.writes & self.reads)

    def conflicts_with(self, other: Tool) -> bool:
        """Whether a call of this tool and one of `other` must not run at the same time."""
        return self.exclusive or other.exclusive or bool(self.shared_resources(other))

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI function-tool entry for `tools=[...]` (a fresh copy each call)."""
        parameters = (
            copy.deepcopy(dict(self.parameters))
            if self.parameters is not None
            else {"type": "object", "properties": {}}
        )
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }
