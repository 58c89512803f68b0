"""Secret redaction: what never reaches an events file, a results file or stderr.

A structlog processor (`redact_secrets`) blanks values under secret-looking keys at any depth
(`Authorization`, `x-api-key`, `api_key`, ...) and anything held by a `SecretStr`. Then every
string value (never the rendered text, which a secret such as `null` or `1000` would cut through;
never a mapping's keys, which are field names) loses every registered secret (`register_secret`,
in its raw and JSON-escaped forms), every bearer-token or API-key shaped string, and the
credentials of a URL (`user:pass@`, `?key=...`): events through `ScrubbingRenderer`, results lines
through `scrub_value`, and only when a cheap look at the rendered line (`may_hold_secret`) says
it may hold one.

Only a value shaped like a key is registered for blanking wherever it occurs: at least
`MIN_SECRET_LENGTH` characters, varied enough (`MIN_SECRET_ENTROPY` bits a character), and not
one of the usual placeholders of local servers (`test`, `none`, `EMPTY`, `ollama`,
`lm-studio`, ...). A placeholder in free text is a word of an answer or of a field's name, not a
secret; it is still blanked where it is a secret (an Authorization header, a key-shaped value).
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections import Counter
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
_URL_SECRET = re.compile(  # a URL's user:password@, and its query's credentials
    r"(?<=://)[^\s/?#@:\"']+:[^\s/?#@\"']+(?=@)"
    r"|(?<=[?&])(?:api[-_]?key|key|token|access[-_]?token|auth|sig|signature|secret|password)"
    r"=[^&\s\"'#]+",
    re.IGNORECASE,
)

MIN_SECRET_LENGTH = 12
"""A registered value shorter than this is not blanked in free text (see the module)."""
MIN_SECRET_ENTROPY = 3.0
"""Bits a character (Shannon, over the value's own characters) below which a registered value is
too plain to blank in free text: `aaaaaaaaaaaaaaaa` or `testtesttesttest` would cut words."""
PLACEHOLDER_KEYS = frozenset(
    (
        "test",
        "none",
        "null",
        "dummy",
        "empty",
        "ollama",
        "lm-studio",
        "lmstudio",
        "vllm",
        "local",
        "fake",
        "fake-key",
        "placeholder",
        "not-needed",
        "no-key",
        "nokey",
        "no-key-required",
        "sk-no-key-required",
        "not-used",
        "unused",
        "anything",
        "api-key",
        "apikey",
        "your-api-key",
        "your-api-key-here",
        "your_api_key",
        "your_api_key_here",
        "changeme",
        "secret",
        "password",
    )
)
"""Keys that local servers' docs use (vLLM `EMPTY`, Ollama `ollama`, LM Studio `lm-studio`,
llama.cpp `sk-no-key-required`), compared without case: never blanked in free text."""

_secrets: tuple[str, ...] = ()  # longest first, so a key inside a longer one goes whole
_lock = threading.Lock()


def secret_shaped(value: str) -> bool:
    """Whether `value` looks like a real key, not a placeholder: long enough, varied enough, and
    not a well-known placeholder (see the module). Only such a value is blanked in free text."""
    if len(value) < MIN_SECRET_LENGTH or value.strip().lower() in PLACEHOLDER_KEYS:
        return False
    n = len(value)
    entropy = -sum(c / n * math.log2(c / n) for c in Counter(value).values())
    return entropy >= MIN_SECRET_ENTROPY


def register_secret(value: str | SecretStr | None, *, always: bool = False) -> None:
    """Make sure `value` is blanked wherever it appears in an event or a results line, even
    inside a longer string. A value that does not look like a key (`secret_shaped`: `test`,
    `EMPTY`, `ollama`, short or plain strings) is left alone unless `always`: blanking it would
    cut words out of answers; where it is sent as a credential (an Authorization or `x-api-key`
    header), it is blanked by that field's name anyway."""
    global _secrets
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    if not raw or not (always or secret_shaped(raw)):
        return
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
    # `_key_shaped` and `_url_secret` written out: every event line pays for this look.
    if (
        "Bearer" in text
        or "Basic" in text
        or "sk-" in text
        or "xox" in text
        or ("://" in text and ("@" in text or "=" in text))
    ):
        return True
    secrets = _secrets
    return bool(secrets) and any(secret in text for secret in secrets)


def scrub_line(text: str) -> str:
    """`text` with every registered secret (whole), every bearer/API-key shaped string and a
    URL's credentials blanked. For one string value: applied to rendered JSON it could cut
    through its syntax."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if _key_shaped(text):
        text = _SECRET_VALUE.sub(REDACTED, text)
    if _url_secret(text):
        text = _URL_SECRET.sub(_blank_url_secret, text)
    return text


def _key_shaped(text: str) -> bool:
    """Whether `text` may hold a bearer token or an API-key shaped string (substring checks:
    every event line pays for them)."""
    return "Bearer" in text or "Basic" in text or "sk-" in text or "xox" in text


def _url_secret(text: str) -> bool:
    """Whether `text` may hold a URL's credentials (`user:pass@`, `?key=`): a URL with either
    (an answer's `1 + 1 = 2` is not looked at again)."""
    return "://" in text and ("@" in text or "=" in text)


def _blank_url_secret(match: re.Match[str]) -> str:
    """A URL's `user:password` goes whole; a query's `key=value` keeps its name."""
    found = match.group()
    name, equals, _ = found.partition("=")
    return f"{name}={REDACTED}" if equals and ":" not in name else REDACTED


def scrub_value(value: Any) -> Any:
    """A copy of `value` with `scrub_line` applied to every string value in it; a mapping's keys
    are names, never rewritten (`n_tests` stays `n_tests` whatever the key); numbers, booleans
    and None are left as they are, so JSON made of it stays valid and typed."""
    if isinstance(value, str):
        return scrub_line(value)
    if isinstance(value, SecretStr):
        return REDACTED
    if isinstance(value, Mapping):
        return {key: scrub_value(item) for key, item in value.items()}
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
