"""SimConfig: every knob of the simulated provider in one frozen value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

LatencyDistribution = Literal["fixed", "uniform", "exponential", "lognormal"]
"""How a request's delay is drawn from `latency` (mean) and `latency_jitter`."""

_DISTRIBUTIONS = ("fixed", "uniform", "exponential", "lognormal")


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Behaviour of a `SimProvider`: latency, caps, injected faults and token accounting.

    Every probability is drawn per attempt from a hash of (seed, request body, attempt index of that
    body), so a run is reproducible whatever order requests arrive in. Invalid values (negative
    latency, probabilities outside [0, 1], fault rates summing above 1) raise `ValueError`.

    Latency: "fixed" sleeps exactly `latency`; "uniform" sleeps `latency` ± `latency_jitter`
    (uniformly, never below 0); "exponential" sleeps an exponential draw with mean `latency`
    (jitter ignored); "lognormal" sleeps a lognormal draw with median `latency` and shape
    (sigma) `latency_jitter`: heavy-tailed, as providers are under load (sigma 1.29 puts the p99
    at 20 times the median). A delay of 0 does not sleep at all.

    Caps: `max_concurrency` answers 429 at once (Retry-After = `retry_after`) to a request arriving
    while that many are in flight; `rpm` answers 429 once `rpm` requests were admitted in the last
    `rate_window` seconds (60 by default, hence "per minute"; a shorter one makes rate-limit tests
    fast). Its Retry-After is the time until the oldest admitted request leaves the window, rounded
    up to whole seconds (at least 1) when `rate_window` >= 1, to the millisecond when shorter.
    `tpm` does the same for the prompt + completion tokens of the answers sent in the window.
    `rate_window` is also the window of the `window_max_requests` / `window_max_tokens` stats.
    With `rpm` or `tpm` set, every answer announces them in rate-limit headers (OpenAI's
    `x-ratelimit-*` on the OpenAI routes, Anthropic's `anthropic-ratelimit-*` on `/v1/messages`,
    limits as rates per minute: `rpm=300, rate_window=5` announces 3600); a cap's 429 says that
    budget's remaining is 0, a `max_concurrency` 429 does not.

    Faults, in this order after admission: the first `fail_first` attempts of each distinct request
    (same path and body bytes) answer `fail_first_status`; then `fault_rates` maps a status to its
    probability per attempt; then `hang_rate` never answers (until the client goes away); after the
    latency, `malformed_rate` sends a 200 whose body is not JSON and `truncated_rate` a 200 whose
    JSON is cut in half. 429 and 503 answers carry `Retry-After: retry_after`.

    Streaming: a request with `"stream": true` gets its first byte after the latency, then one
    server-sent event every `stream_chunk_delay` seconds (0: all at once), so a test can make a
    stream stall between chunks.

    Memory: attempt indexes are kept for the `attempt_memory` most recently admitted distinct
    requests only, so a long-running provider does not grow with every distinct body. A request
    not seen among the last `attempt_memory` distinct ones starts again at attempt 0 (and so
    meets `fail_first` again): retries of one request are remembered unless that many other
    distinct requests are admitted between two of them. Only then does arrival order matter to
    the draws. The RPM cap and the window stats keep one `rate_window` of arrival times.

    Batches (OpenAI's `/v1/batches`, Anthropic's `/v1/messages/batches`): a batch ends
    `batch_delay` seconds after it was created. The first `batch_fail_first` batches created
    (both APIs counted together) fail, and then each fails with probability `batch_fail_rate`,
    drawn from (seed, its requests, how often these requests were sent as one batch before);
    OpenAI's batch then has status `failed`, Anthropic's ends with every request errored. Each
    line of a batch that does not fail expires with probability `batch_expire_rate` (its batch
    then ends `expired` on OpenAI) or else is answered a retryable 500 with probability
    `batch_error_rate`, drawn from (seed, path, body, how often this body was sent in a batch
    before). The live faults, latency and caps do not touch batch lines.
    """

    seed: int = 0
    latency: float = 0.05
    latency_jitter: float = 0.0
    latency_distribution: LatencyDistribution = "uniform"
    max_concurrency: int | None = None
    rpm: int | None = None
    tpm: int | None = None
    retry_after: float = 1.0
    fail_first: int = 0
    fail_first_status: int = 429
    fault_rates: Mapping[int, float] = field(default_factory=dict)
    hang_rate: float = 0.0
    malformed_rate: float = 0.0
    truncated_rate: float = 0.0
    tokens_per_char: float = 0.25
    rate_window: float = 60.0
    attempt_memory: int = 65_536
    stream_chunk_delay: float = 0.0
    batch_delay: float = 0.0
    batch_fail_first: int = 0
    batch_fail_rate: float = 0.0
    batch_error_rate: float = 0.0
    batch_expire_rate: float = 0.0

    def __post_init__(self) -> None:
        _check(self.latency >= 0 and math.isfinite(self.latency), "latency", self.latency)
        _check(self.latency_jitter >= 0, "latency_jitter", self.latency_jitter)
        _check(
            self.latency_distribution in _DISTRIBUTIONS,
            "latency_distribution",
            self.latency_distribution,
        )
        _check(
            self.max_concurrency is None or self.max_concurrency >= 1,
            "max_concurrency",
            self.max_concurrency,
        )
        _check(self.rpm is None or self.rpm >= 1, "rpm", self.rpm)
        _check(self.tpm is None or self.tpm >= 1, "tpm", self.tpm)
        _check(self.retry_after >= 0, "retry_after", self.retry_after)
        _check(self.fail_first >= 0, "fail_first", self.fail_first)
        _check(400 <= self.fail_first_status <= 599, "fail_first_status", self.fail_first_status)
        for status, rate in self.fault_rates.items():
            _check(400 <= status <= 599, "fault_rates status", status)
            _check(0.0 <= rate <= 1.0, f"fault_rates[{status}]", rate)
        total = sum(self.fault_rates.values())
        _check(total <= 1.0 + 1e-9, "sum of fault_rates", total)
        for name in ("hang_rate", "malformed_rate", "truncated_rate"):
            rate = getattr(self, name)
            _check(0.0 <= rate <= 1.0, name, rate)
        corrupt = self.malformed_rate + self.truncated_rate
        _check(corrupt <= 1.0 + 1e-9, "malformed_rate + truncated_rate", corrupt)
        _check(self.tokens_per_char > 0, "tokens_per_char", self.tokens_per_char)
        _check(
            self.rate_window > 0 and math.isfinite(self.rate_window),
            "rate_window",
            self.rate_window,
        )
        _check(self.attempt_memory >= 1, "attempt_memory", self.attempt_memory)
        _check(
            self.stream_chunk_delay >= 0 and math.isfinite(self.stream_chunk_delay),
            "stream_chunk_delay",
            self.stream_chunk_delay,
        )
        _check(
            self.batch_delay >= 0 and math.isfinite(self.batch_delay),
            "batch_delay",
            self.batch_delay,
        )
        _check(self.batch_fail_first >= 0, "batch_fail_first", self.batch_fail_first)
        for name in ("batch_fail_rate", "batch_error_rate", "batch_expire_rate"):
            rate = getattr(self, name)
            _check(0.0 <= rate <= 1.0, name, rate)
        lines = self.batch_error_rate + self.batch_expire_rate
        _check(lines <= 1.0 + 1e-9, "batch_error_rate + batch_expire_rate", lines)
        # A private, sorted copy: callers may not mutate the mapping under a running provider.
        object.__setattr__(self, "fault_rates", dict(sorted(self.fault_rates.items())))


def _check(ok: bool, name: str, value: object) -> None:
    if not ok:
        raise ValueError(f"SimConfig: invalid {name}: {value!r}")
