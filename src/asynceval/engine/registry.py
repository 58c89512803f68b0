"""ComponentRegistry: the components of one repetition, whose traces and configs go in its report.

Each repetition gets its own registrations through a context variable (not a thread-local), so
repetitions running at once never see each other's components, and sync code the repetition runs
in worker threads registers into the same place. A component is anything with `gather_traces()`
and/or `gather_config()` returning a dict; one whose gather raises yields an error entry instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from .._clock import utc_isoformat
from .._scoped import Scoped

_SINGLE = ("environment", "user")  # categories holding one component, not a mapping


C = TypeVar("C")


class _Scope:
    __slots__ = ("by_id", "components")

    def __init__(self) -> None:
        self.components: dict[str, Any] = {}  # "category:name" -> component
        self.by_id: dict[int, str] = {}


_scope: ContextVar[_Scope | None] = ContextVar("asynceval_registry", default=None)


class ComponentRegistry:
    """Registers components per repetition; `Benchmark.register` delegates here."""

    def __init__(self, benchmark_config: Mapping[str, Any] | None = None) -> None:
        self.benchmark_config = dict(benchmark_config or {})

    def scope(self) -> Scoped[_Scope]:
        """A `with` block with a fresh, empty set of registrations for the code run inside (one
        repetition)."""
        return Scoped(_scope, _Scope())

    def _current(self) -> _Scope:
        scope = _scope.get()
        if scope is None:
            raise RuntimeError("register() works inside a task repetition run by the engine")
        return scope

    def register(self, category: str, name: str, component: C) -> C:
        """Track `component` as `category:name` and return it; registering it again under the
        same key does nothing, under another key is a ValueError."""
        if not category or not name or ":" in category:
            raise ValueError(
                f"category and name must be non-empty (no ':' in category): {category!r}, {name!r}"
            )
        scope = self._current()
        key = f"{category}:{name}"
        existing = scope.by_id.get(id(component))
        if existing is not None:
            if existing != key:
                raise ValueError(f"component already registered as {existing!r}, not {key!r}")
            return component
        if key in scope.components:
            raise ValueError(f"another component is already registered as {key!r}")
        scope.components[key] = component
        scope.by_id[id(component)] = key
        return component

    def is_registered(self, component: Any) -> bool:
        """Whether `component` is registered in the current repetition."""
        scope = _scope.get()
        return scope is not None and id(component) in scope.by_id

    def collect_traces(self) -> dict[str, Any]:
        """Every registered component's `gather_traces()`, grouped by category."""
        return self._collect("gather_traces", extra={})

    def collect_configs(self) -> dict[str, Any]:
        """Every registered component's `gather_config()`, plus the benchmark's own config."""
        return self._collect("gather_config", extra={"benchmark": self.benchmark_config})

    def _collect(self, method: str, extra: dict[str, Any]) -> dict[str, Any]:
        scope = _scope.get() or _Scope()
        out: dict[str, Any] = {
            "metadata": {
                "timestamp": utc_isoformat(),
                "total_components": len(scope.components),
            },
            **extra,
        }
        for key, component in list(scope.components.items()):
            category, name = key.split(":", 1)
            gather = getattr(component, method, None)
            if gather is None:
                continue
            try:
                entry = dict(gather())
                entry.setdefault("name", name)
            except Exception as exc:  # one broken component must not lose the others
                entry = {"name": name, "error": str(exc), "error_type": type(exc).__name__}
            if category in _SINGLE:
                out[category] = entry
            else:
                out.setdefault(category, {})[name] = entry
        return out
