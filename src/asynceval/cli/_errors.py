"""The one exception the command line turns into a one-line message and an exit status."""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..errors import AsyncEvalError

_CLI_DIR = str(Path(__file__).parent)


class CLIError(AsyncEvalError):
    """A mistake the person at the terminal can fix; printed as one line, exit status 2."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(text: str) -> str:
    """`text` on one line: its lines (blank ones dropped) joined by "; "."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def describe(exc: BaseException) -> str:
    """`Type: message (at FILE:LINE)` for an exception raised by the person's code, on one line.

    The place is the innermost frame of the traceback outside Python's import machinery and this
    package (the frames that called the person's code): where it was raised. None when every
    frame is ours, and none for a SyntaxError, whose message names its file and line already."""
    text = one_line(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, SyntaxError):
        return text
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(("<frozen ", _CLI_DIR))
    ]
    return f"{text} (at {frames[-1].filename}:{frames[-1].lineno})" if frames else text


WarningHandler = Callable[[Warning | str, type[Warning]], bool]
_handlers: dict[str, WarningHandler] = {}
_show_original: Callable[..., None] | None = None


def handle_warnings(name: str, handler: WarningHandler) -> None:
    """Let `handler` deal with each warning first (True: it did, so it is not shown); a later
    handler of the same `name` replaces the earlier one, so repeated runs in one process do not
    stack wrappers around `warnings.showwarning`."""
    global _show_original
    _handlers[name] = handler
    if _show_original is None:
        _show_original = warnings.showwarning
        warnings.showwarning = _showwarning


def _showwarning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    if any(handler(message, category) for handler in list(_handlers.values())):
        return
    assert _show_original is not None
    _show_original(message, category, filename, lineno, file, line)
