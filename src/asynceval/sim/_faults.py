"""Per-attempt random draws: which fault (if any), hang or not, how long to wait, corrupt or not.

The draws come from a hash of (seed, request digest, attempt index), not from a shared random
sequence, so the pattern of faults does not depend on the order requests arrive in.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from asynceval.sim._config import SimConfig

_SCALE = 2.0**-64


_NORMAL = statistics.NormalDist()


class Corruption(Enum):
    """How a 200 body is damaged: not at all, replaced by non-JSON, or cut in half."""

    NONE = "none"
    MALFORMED = "malformed"
    TRUNCATED = "truncated"


@dataclass(frozen=True, slots=True)
class Draws:
    """Four independent uniforms in [0, 1) for one attempt of one request."""

    fault: float
    hang: float
    latency: float
    corrupt: float

    @classmethod
    def for_attempt(cls, seed: int, digest: bytes, attempt: int) -> Draws:
        """The draws of attempt `attempt` (0 first) of the request whose body hash is `digest`."""
        key = b"%d:%d:" % (seed, attempt)
        raw = hashlib.blake2b(key + digest, digest_size=32).digest()
        u = [int.from_bytes(raw[i : i + 8], "big") * _SCALE for i in range(0, 32, 8)]
        return cls(fault=u[0], hang=u[1], latency=u[2], corrupt=u[3])

    def fault_status(self, rates: Mapping[int, float]) -> int | None:
        """The injected status for this attempt, or None; statuses share [0, 1) in sorted order."""
        edge = 0.0
        for status, rate in rates.items():
            edge += rate
            if self.fault < edge:
                return status
        return None

    def delay(self, config: SimConfig) -> float:
        """Seconds to wait before answering, per `config.latency_distribution` (never negative)."""
        mean = config.latency
        if config.latency_distribution == "fixed" or (mean <= 0 and config.latency_jitter <= 0):
            return mean
        if config.latency_distribution == "exponential":
            return -mean * math.log1p(-self.latency)
        if config.latency_distribution == "lognormal":
            # The draw's normal quantile: the same uniform draw as the other shapes, so a seed
            # still fixes every delay.
            u = min(max(self.latency, 1e-12), 1.0 - 1e-12)
            return mean * math.exp(config.latency_jitter * _NORMAL.inv_cdf(u))
        return max(0.0, mean + (2.0 * self.latency - 1.0) * config.latency_jitter)

    def corruption(self, config: SimConfig) -> Corruption:
        """Whether this 200 answer is sent malformed, truncated or intact."""
        if self.corrupt < config.malformed_rate:
            return Corruption.MALFORMED
        if self.corrupt < config.malformed_rate + config.truncated_rate:
            return Corruption.TRUNCATED
        return Corruption.NONE
