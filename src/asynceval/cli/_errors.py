"""The one exception the command line turns into a one-line message and an exit status."""

from __future__ import annotations

from ..errors import AsyncEvalError


class CLIError(AsyncEvalError):
    """A mistake the person at the terminal can fix; printed as one line, exit status 2."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
