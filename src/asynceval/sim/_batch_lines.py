"""What a batch does with its requests, the same for both batch APIs: when it ends, whether it
fails, what becomes of each line, and each line's answer.

A line's answer is the live route's (`_compose`) for its body sent as compact JSON, the way the
SDKs send it: the same text, usage and id as the live endpoint's answer to that body at the same
attempt index. Batch lines keep attempt indexes of their own (how often a body was sent in a
batch before), so a line that errored or expired draws again when it is sent in a later batch;
live requests neither move them nor are moved by them. Every draw is a hash of (seed, what is
drawn, the body or the batch, its attempt index), never of arrival order.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, NamedTuple

from asynceval.sim._compose import compact, render, request_digest
from asynceval.sim._config import SimConfig
from asynceval.sim._dialect import BadRequest, Dialect, Usage, status_message
from asynceval.sim._memory import AttemptMemory

_SCALE = 2.0**-64
SERVER_ERROR = 500
"""The status of an injected line error: retryable, as a provider's own failure is."""


class Outcome(Enum):
    """What the draws made of a line: answered (well or not), an injected error, or expired."""

    ANSWER = "answer"
    ERROR = "error"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Line:
    """One request of a batch, planned: its body, hash, batch attempt index and outcome."""

    custom_id: str
    body: Mapping[str, Any]
    digest: bytes
    attempt: int
    outcome: Outcome


class Result(NamedTuple):
    """A line's answer: status 200 and the live answer document, or an error status and the
    dialect's error body; `usage` for a 200."""

    status: int
    document: dict[str, Any]
    usage: Usage | None


class Timeline:
    """A batch's clock: created now, ending `delay` seconds later."""

    __slots__ = ("created", "delay", "started")

    def __init__(self, delay: float) -> None:
        self.created = time.time()
        self.started = time.monotonic()
        self.delay = delay

    def progress(self) -> float:
        """How far along the batch is: 0 at creation, 1 (and more) once it is due."""
        elapsed = time.monotonic() - self.started
        return elapsed / self.delay if self.delay > 0 else 1.0 + elapsed

    def due(self) -> bool:
        """Whether the batch has ended by now (or would have, had it not been cancelled)."""
        return self.progress() >= 1.0

    def at(self, fraction: float) -> float:
        """The wall-clock time at `fraction` of the way from creation to the end."""
        return self.created + fraction * self.delay


def new_id(prefix: str) -> str:
    """A fresh random id: a restarted provider never answers for an earlier one's batches."""
    return f"{prefix}{secrets.token_hex(12)}"


def rfc3339(moment: float) -> str:
    """`moment` (Unix seconds) as Anthropic writes times: RFC 3339 in UTC, microseconds, Z."""
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


class BatchLines:
    """Plans and answers the lines of both APIs' batches, and decides which batches fail.

    Thread-safe: the counts it keeps are taken under a lock, the attempt memory has its own.
    """

    __slots__ = ("_attempts", "_created", "_lock", "_salt", "config")

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self._salt = b"%d:" % config.seed
        self._attempts = AttemptMemory(config.attempt_memory)
        self._created = 0
        self._lock = threading.Lock()

    @staticmethod
    def digest(path: str, body: Mapping[str, Any]) -> bytes:
        """The hash of `body` sent to `path`, as the live route hashes it."""
        return request_digest(path, compact(body))

    def fails(self, digests: Sequence[bytes]) -> bool:
        """Whether a new batch of these requests (their digests, in order) fails: one of the
        first `batch_fail_first` batches, or by the `batch_fail_rate` draw."""
        with self._lock:
            number = self._created
            self._created += 1
        if number < self.config.batch_fail_first:
            return True
        if self.config.batch_fail_rate <= 0:
            return False
        key = hashlib.blake2b(b"batch\0" + b"".join(digests), digest_size=16).digest()
        attempt = self._attempts.next(key)
        return self._uniform(b"batch", key, attempt) < self.config.batch_fail_rate

    def plan(self, custom_id: str, body: Mapping[str, Any], digest: bytes) -> Line:
        """A line of a batch that goes ahead: its attempt index counted, its outcome drawn."""
        attempt = self._attempts.next(digest)
        draw = self._uniform(b"line", digest, attempt)
        config = self.config
        if draw < config.batch_expire_rate:
            outcome = Outcome.EXPIRED
        elif draw < config.batch_expire_rate + config.batch_error_rate:
            outcome = Outcome.ERROR
        else:
            outcome = Outcome.ANSWER
        return Line(custom_id, body, digest, attempt, outcome)

    def answer(self, dialect: Dialect, line: Line) -> Result:
        """The line's answer (an expired line has none: ask only for the others)."""
        if line.outcome is Outcome.ERROR:
            message = status_message(SERVER_ERROR)
            return Result(SERVER_ERROR, dialect.error(SERVER_ERROR, message, None), None)
        try:
            parsed = dialect.parse(line.body)
        except BadRequest as exc:
            return Result(400, dialect.error(400, str(exc), exc.param), None)
        except Exception as exc:  # JSON of the wrong shape
            message = f"Could not parse the request body: {exc}"
            return Result(400, dialect.error(400, message, None), None)
        if parsed.stream:
            message = "streaming is not supported in a batch; send 'stream': false"
            return Result(400, dialect.error(400, message, "stream"), None)
        try:
            document, usage = render(
                dialect, parsed, self._salt, line.digest, line.attempt, self.config.tokens_per_char
            )
        except Exception as exc:  # a schema the generator cannot satisfy
            message = f"The simulator cannot answer this: {exc!r}"
            return Result(400, dialect.error(400, message, None), None)
        return Result(200, document, usage)

    def clear(self) -> None:
        """Forget the attempt indexes and the count of batches created."""
        self._attempts.clear()
        with self._lock:
            self._created = 0

    def _uniform(self, what: bytes, key: bytes, attempt: int) -> float:
        head = b"%d:%s:%d:" % (self.config.seed, what, attempt)
        raw = hashlib.blake2b(head + key, digest_size=8).digest()
        return int.from_bytes(raw, "big") * _SCALE
