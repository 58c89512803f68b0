"""Names that left a module's surface keep resolving for one release, each with one warning.

A package lists them (`{name: "asynceval.home"}`, or `"asynceval.home:new_name"`) and takes
`moved_names(...)` as its module `__getattr__`: `from asynceval.llm import Gateway` still works,
warns once (DeprecationWarning, pointing at the importing line), and says where the name lives.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

_INTERNAL = frozenset(
    {"asynceval.funnel"}
)  # packages that are no public API (their docstring says)


def moved_names(
    module: str, moved: Mapping[str, str], namespace: dict[str, Any], *, depth: int = 0
) -> Callable[[str], Any]:
    """A module `__getattr__` for `module` (its `globals()` is `namespace`) that resolves each
    name of `moved` from its new home with a DeprecationWarning, then caches it there so that
    `from module import name`, which looks twice, warns once. Other names: AttributeError.
    `depth`: the frames between the importing line and this function (a `__getattr__` of the
    module's own that calls it: 1), so that the warning points at the importing line."""

    def __getattr__(name: str) -> Any:
        where_now = moved.get(name)
        if where_now is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, attribute = where_now.partition(":")
        if home in _INTERNAL or home.rsplit(".", 1)[-1].startswith("_"):
            where = f"it is internal now ({home}, not a public API)"
        else:
            where = f"import it from {home}"
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed in the next release; {where}",
            DeprecationWarning,
            stacklevel=2 + depth,
        )
        value = getattr(importlib.import_module(home), attribute or name)
        namespace[name] = value
        return value

    return __getattr__
