"""Runtime: everything mutable a process shares for its LLM calls, in one object.

Settings (read once), the call limiter, the rate buckets, the retry policy, the connection pools of
every event loop, and the embedded simulated provider. A model or benchmark given no runtime uses
`Runtime.current()` at the moment of the call: the runtime bound in this context (`async with
Runtime(...)`), else the process default, built once from `Settings()` on first use. So two
threads each running a benchmark, or two event loops sharing one model, share one limit.

Environment changes after the process default exists are not seen: build a new Runtime (and
bind it) to use other settings.
"""

from __future__ import annotations

import threading
import weakref
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .. import _event_output, events
from .._writer import Writer, writer
from ..config import Settings
from ..limits import ConcurrencyController, ProviderRates, RateLimiter, RetryPolicy
from ._pools import Pools
from .cache import CallCache
from .prices import Prices

if TYPE_CHECKING:
    from ..sim import SimProvider

_UNSET: Any = object()

_bound: ContextVar[Runtime | None] = ContextVar("asynceval_runtime", default=None)
_entered: ContextVar[tuple[Token[Runtime | None], ...]] = ContextVar(
    "asynceval_runtime_entered", default=()
)
_default: Runtime | None = None
_default_lock = threading.Lock()


class Runtime:
    """The process's funnel state: `async with Runtime(settings) as rt:` binds it to this context.

    `limiter` (a `ConcurrencyController`) and `rate` (a `RateLimiter`, or None for no RPM/TPM
    limit) default to ones built from `settings`. One runtime serves any number of threads and
    event loops at once; `aclose()` closes the connection pools of the loop it is awaited in
    (later calls reopen them).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        limiter: ConcurrencyController | None = None,
        rate: RateLimiter | None = _UNSET,
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        self.limiter = (
            limiter if limiter is not None else ConcurrencyController.from_settings(self.settings)
        )
        self.rate: RateLimiter | None = (
            RateLimiter.from_settings(self.settings) if rate is _UNSET else rate
        )
        self.retry_policy = RetryPolicy.from_settings(self.settings)
        self.pools = Pools()
        # A runtime dropped unclosed closes its pools on their loops (at exit, the loops do).
        weakref.finalize(self, self.pools.close_soon).atexit = False
        self.writer: Writer = writer()  # files are process-wide: one writer thread for all
        self._sim: SimProvider | None = None
        self._sim_lock = threading.Lock()
        self._provider_rates: dict[str, ProviderRates] = {}  # guarded by `_sim_lock`
        # Endpoints that refused `stream_options`: streamed chat completions go to them as their
        # caller wrote them (`asynceval.funnel._usage_chunk`).
        self.plain_streams: set[str | None] = set()
        # What each model's calls cost: LLM_PRICES_FILE (read now: a bad one is refused at
        # once), then the simulator's and genai-prices' prices.
        self.prices = (
            Prices.from_file(self.settings.llm_prices_file)
            if self.settings.llm_prices_file
            else Prices()
        )
        # Answers of identical calls from disk (LLM_CACHE_DIR), for every model and transport.
        self.cache = (
            CallCache(self.settings.llm_cache_dir, max_bytes=self.settings.llm_cache_max_bytes)
            if self.settings.llm_cache_dir
            else None
        )

    @classmethod
    def current(cls) -> Runtime:
        """The runtime bound in this context, else the process default (built on first use)."""
        bound = _bound.get()
        if bound is not None:
            return bound
        return _process_default()

    def bind(self) -> Token[Runtime | None]:
        """Make this runtime current in this context (sync code: a script, the CLI); undo with
        `_bound.reset(token)` via `unbind`."""
        return _bound.set(self)

    @staticmethod
    def unbind(token: Token[Runtime | None]) -> None:
        _bound.reset(token)

    def provider_rates(self, endpoint: str) -> ProviderRates:
        """What `endpoint`'s answers announced of its rate limits, shared by every gateway on
        this runtime's limits; it learns each limit that `rate` (LLM_REQUESTS_PER_MINUTE,
        LLM_TOKENS_PER_MINUTE) leaves unset, since a setting always wins."""
        with self._sim_lock:
            rates = self._provider_rates.get(endpoint)
            if rates is None:
                rate = self.rate
                rates = self._provider_rates[endpoint] = ProviderRates(
                    endpoint,
                    learn_requests=rate is None or rate.requests_per_minute is None,
                    learn_tokens=rate is None or rate.tokens_per_minute is None,
                )
        return rates

    @property
    def sim(self) -> SimProvider:
        """The embedded simulated provider models talk to when no base URL is set anywhere."""
        if self._sim is None:
            from ..sim import SimConfig, SimProvider  # only when the embedded provider is used

            with self._sim_lock:
                if self._sim is None:
                    self._sim = SimProvider(SimConfig())
        return self._sim

    async def aclose(self) -> None:
        """Close this event loop's connection pools (calls made later open new ones)."""
        await self.pools.aclose()

    async def __aenter__(self) -> Self:
        events.ensure_logging(self.settings)
        _entered.set((*_entered.get(), _bound.set(self)))  # per context: tasks may share `self`
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        *outer, token = _entered.get()
        _entered.set(tuple(outer))
        _bound.reset(token)
        await self.aclose()

    def __repr__(self) -> str:
        return f"Runtime(limit={self.limiter.limit}, rate={self.rate is not None})"


# Event output (below this layer) takes the settings in force from here when given none.
_event_output.settings_from(lambda: Runtime.current().settings)


def _process_default() -> Runtime:
    global _default
    runtime = _default
    if runtime is None:
        with _default_lock:
            if _default is None:
                _default = Runtime()
            runtime = _default
    return runtime


def set_process_default(runtime: Runtime | None = None) -> None:
    """Replace the process default (the CLI installs the runtime it built; tests reset it)."""
    global _default
    with _default_lock:
        _default = runtime
