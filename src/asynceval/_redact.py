"""Secret redaction: what never reaches an events file, a results file or stderr.

A structlog processor (`redact_secrets`) blanks values under secret-looking keys at any depth and
anything held by a `SecretStr`. Then every string value (never the rendered text, which a secret
such as `null` or `1000` would cut through) loses every registered secret (`register_secret`, in
its raw and JSON-escaped forms) and every bearer-token or API-key shaped string: events through
`ScrubbingRenderer`, results lines through `scrub_value`, and only when a cheap look at the
rendered line (`may_hold_secret`) says it may hold one.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

if TYPE_CHECKING:  # structlog itself is imported only for the console format
    from structlog.typing import EventDict, Processor, WrappedLogger

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"api[-_]?key|authorization|secret|passw(or)?d|cookie|bearer|access[-_]?token|refresh[-_]?token",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{6,}|\bsk-[A-Za-z0-9_\-]{8,}|\bxox[abp]-[A-Za-z0-9\-]{8,}"
)

_secrets: tuple[str, ...] = ()  # longest first, so a key inside a longer one goes whole
_lock = threading.Lock()


def register_secret(value: str | SecretStr | None) -> None:
    """Make sure `value` is blanked wherever it appears in an event, even inside a longer string."""
    global _secrets
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    if raw and len(raw) >= 4:
        with _lock:  # a new tuple, so a thread scrubbing a line never sees it change
            # Also the form JSON writes it in (escaped quotes, backslashes, non-ASCII).
            _secrets = tuple(sorted({*_secrets, raw, json.dumps(raw)[1:-1]}, key=len, reverse=True))


# Fields asynceval writes itself: their names are not secret-looking (their values are still
# scrubbed by `ScrubbingRenderer`).
_OWN_FIELDS = frozenset(
    (
        "event",
        "level",
        "timestamp",
        "agent",
        "dimension",
        "call_id",
        "queue_depth",
        "active_slots",
        "wait_s",
        "held_s",
        "attempt",
        "status_code",
        "delay_s",
        "timeout_s",
        "attempts",
        "elapsed_s",
        "error",
        "task_id",
        "repeat_idx",
        "status",
        "termination_reason",
        "duration_s",
        "n_tasks",
        "counts",
    )
)


def _redact_structure(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return REDACTED
    if isinstance(value, Mapping):
        return {
            key: REDACTED if _SECRET_KEY.search(str(key)) else _redact_structure(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_redact_structure(item) for item in value]
    return value


@functools.lru_cache(maxsize=4096)  # events reuse a few names; an application inventing more
def secret_key(key: str) -> bool:
    """Whether a top-level field name looks secret."""
    return key not in _OWN_FIELDS and _SECRET_KEY.search(key) is not None


_PLAIN = frozenset((str, int, float, bool, type(None)))


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: blank values under secret-looking keys at any depth, and SecretStrs."""
    for key, value in event_dict.items():
        if secret_key(key):
            event_dict[key] = REDACTED
        elif type(value) not in _PLAIN:
            event_dict[key] = _redact_structure(value)
    return event_dict


def may_hold_secret(text: str) -> bool:
    """Whether rendered text may hold a secret: cheap substring checks, so that the common line
    (none) pays for nothing more."""
    if "Bearer" in text or "Basic" in text or "sk-" in text or "xox" in text:
        return True
    secrets = _secrets
    return bool(secrets) and any(secret in text for secret in secrets)


def scrub_line(text: str) -> str:
    """`text` with every registered secret (whole) and every bearer/API-key shaped string blanked.
    For one string value: applied to rendered JSON it could cut through its syntax."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "Bearer" in text or "Basic" in text or "sk-" in text or "xox" in text:
        text = _SECRET_VALUE.sub(REDACTED, text)
    return text


def scrub_value(value: Any) -> Any:
    """A copy of `value` with `scrub_line` applied to every string in it (keys included); numbers,
    booleans and None are left as they are, so JSON made of it stays valid and typed."""
    if isinstance(value, str):
        return scrub_line(value)
    if isinstance(value, SecretStr):
        return REDACTED
    if isinstance(value, Mapping):
        return {
            scrub_line(key) if isinstance(key, str) else key: scrub_value(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [scrub_value(item) for item in value]
    return value


class ScrubbingRenderer:
    """Wraps the final renderer: a line that may hold a secret is rendered again from a copy of
    the event whose string values were scrubbed, never by editing the rendered text."""

    def __init__(self, renderer: Processor) -> None:
        self.renderer = renderer

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
        line = str(self.renderer(logger, method_name, dict(event_dict)))  # renderers may pop keys
        if not may_hold_secret(line):
            return line
        return str(self.renderer(logger, method_name, scrub_value(event_dict)))
