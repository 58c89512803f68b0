"""`Scoped`: a `with` block in which a context variable holds a value.

The engine enters several of these per repetition attempt (task context, registry scope, usage
counter, bound event fields); as a small class rather than a `contextlib.contextmanager`
generator, entering and leaving one costs about a third as much.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Scoped(Generic[T]):
    """Sets `var` to `value` on entry (and returns `value`), restores its previous value on
    exit, whatever ends the block. Enter it once: it holds one reset token."""

    __slots__ = ("_token", "_value", "_var")

    def __init__(self, var: ContextVar[Any], value: T) -> None:  # Any: vars of `T | None` too
        self._var = var
        self._value = value

    def __enter__(self) -> T:
        self._token: Token[Any] = self._var.set(self._value)
        return self._value

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._var.reset(self._token)
