"""Settings: every tunable limit, read once from the environment and `.env`.

`Settings()` reads the process environment and `.env` in the working directory; keyword arguments
override both. A bad value fails at construction with a `ConfigError` (a `ValueError`) whose message
names the variable and the value, and so does a `.env` that cannot be read as text; a name in
either that looks like a setting but is none gets an `UnknownSettingWarning` naming the closest.
Settings are read at the edge (a run, the CLI) and passed inward.
Layer 1 of DESIGN section 1: it imports errors and the kernel only; every layer may import it.
"""

from __future__ import annotations

import difflib
import functools
import os
import warnings
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._redact import scrub_line
from .errors import ConfigError

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LogFormat = Literal["json", "console"]
HttpTransport = Literal["aiohttp", "httpx"]
Hedge = Literal["off", "p95"] | float
Lane = Literal["live", "flex", "batch"]
"""How LLM calls are sent (DESIGN section 16): live, OpenAI's flex processing, or provider batches."""
"""LLM_HEDGE: `off`, `p95` (the endpoint's learned p95 latency) or a delay in seconds (> 0)."""

MAX_LLM_CALLS_BOUND = 50


class Settings(BaseSettings):
    """The limits and provider settings in force for a run (see `.env.example` for each one)."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        env_ignore_empty=True,
        frozen=True,
        validate_default=True,
    )

    max_concurrent_llm_calls: int = 5
    """From 1 to 50: LLM call attempts in flight at once across the whole process (on a Dask
    cluster, across all workers). Read once when a run starts; the `run_started` event states it."""
    retry_initial_delay: float = 1.0
    """Seconds, > 0: the backoff before attempt n+1 is
    `min(RETRY_INITIAL_DELAY * 2^(n-1) + U(0, 0.5), RETRY_MAX_DELAY)`, raised to at least the
    provider's Retry-After."""
    retry_max_delay: float = 60.0
    """Seconds, >= RETRY_INITIAL_DELAY: the cap on one backoff delay and on a 429's endpoint
    pause."""
    retry_max_attempts: int = 3
    """At least 1: attempts of one LLM call in total, the first one included."""
    batching_enabled: bool = False
    """Judge panel: one structured call per judge agent for all its dimensions, instead of one call
    per dimension."""
    llm_call_timeout: float = 120.0
    """Seconds, > 0, per attempt: an attempt still out after it is abandoned (its slot released) and
    retried; for a stream, until its first content arrives (each later wait for a chunk is
    LLM_STREAM_IDLE_TIMEOUT's)."""
    max_concurrent_tasks: int = 32
    """At least 1: task repetitions alive at once; the next task is taken from the queue only when
    one ends."""
    task_timeout: float | None = None
    """Seconds, > 0: the timeout of a repetition's attempt for tasks whose protocol sets none;
    unset = no timeout."""
    llm_requests_per_minute: int | None = None
    """At least 1: no 60 s window, the first one included, sends more requests (sliding windows over
    send times, FIFO); unset = no limit."""
    llm_tokens_per_minute: int | None = None
    """At least 1: no 60 s window sends more tokens (prompt + max_tokens charged when sent,
    corrected to the usage reported); unset = no limit."""
    llm_stream_idle_timeout: float = 60.0
    """Seconds, > 0: a streamed answer that brings no chunk for that long is abandoned (its slot
    released, a `stream_stalled` warning); before its first content it is sent again, after that
    the caller gets a timeout error (httpx.ReadTimeout, the OpenAI SDK's APITimeoutError)."""
    llm_hedge: Hedge = "off"
    """`off`, `p95` or seconds (> 0): a non-streaming call still out past its endpoint's learned
    p95 latency (or the given delay) is sent once more when a slot is free; the first answer
    wins, the other is cancelled."""
    llm_hedge_budget: float = 0.05
    """From 0 to 1: the most hedges per run, as a share of its requests (0.05: 5% extra)."""
    llm_lane: Lane = "live"
    """`live`, `flex` (OpenAI's `service_tier: "flex"`: half the price, slower answers) or `batch`
    (calls gathered into provider batches: half the price, answers within 24 hours)."""
    llm_batch_size: int = 1000
    """At least 1: the most requests in one provider batch (never above the provider's cap)."""
    llm_batch_linger: float = 30.0
    """Seconds, >= 0.1: a batch goes once its oldest request has waited this long (or when full,
    or when nothing else can run)."""
    llm_batch_poll: float = 5.0
    """Seconds, > 0: the first wait between looks at a batch in progress (doubling up to 60 s)."""
    llm_prices_file: str | None = None
    """A JSON or YAML file of model prices in genai-prices' vocabulary (`{"MODEL": {"input_mtok":
    2.5, "output_mtok": 10, "cache_read_mtok": 1.25}}`, USD per million tokens), ahead of the
    prices genai-prices bundles; unset = those alone. An entry may also give the model's
    `context_window` and `max_output_tokens` (tokens), which bound a call's worst case under a
    budget (a call whose provider adds context, such as `previous_response_id`, is reserved at
    its model's context window)."""
    max_cost_usd: float | None = None
    """USD, > 0: the most a run may spend on LLM calls (each call reserves its worst case first;
    a call that would go over is not sent, and the run stops with exit status 3); unset = no
    budget."""
    llm_base_url: str | None = None
    """An http(s) URL ending in `/v1`, with no credentials, query string or fragment in it
    (`https://api.openai.com/v1`); unset = the embedded simulated provider."""
    llm_api_key: SecretStr | None = None
    """The provider's API key: a secret, never logged nor written to a results file."""
    llm_model: str | None = None
    """The model name sent with each request."""
    llm_http_transport: HttpTransport = "aiohttp"
    """`aiohttp` (the fastest measured, through httpx's API) or `httpx` (the stock httpcore
    pool)."""
    llm_cache_dir: str | None = None
    """A folder: the model-call cache, which keeps every successful answer and answers an identical
    call from it; unset = no cache (`--cache DIR`, `--no-cache` on the command line)."""
    llm_cache_max_bytes: int | None = None
    """At least 1: the most bytes the model-call cache takes on disk (its SQLite file and log,
    within a tenth from 1 MB up; below 1 MB, the bytes of answers); beyond it the least recently
    used entries are evicted; unset = no bound."""
    max_parallel_tools: int = 5
    """At least 1: tool calls run at once within one agent turn."""
    loop_block_warn_s: float = 1.0
    """Seconds, > 0: an async agent that keeps the event loop from running for longer (a
    `time.sleep`, a blocking client) gets a `loop_blocked` WARNING naming it and how long."""
    run_gc_threshold: int = 10_000
    """At least 0: CPython's young-generation collector threshold while runs go (the default 700
    walks the run's live repetitions every few of them); the thresholds found are put back when the
    last run ends; 0 = leave the collector alone."""
    log_level: LogLevel | None = None
    """The lowest level of asynceval's events written to LOG_FILE or stderr; unset = WARNING on
    stderr, INFO in a LOG_FILE or a run directory's `events.jsonl`."""
    log_format: LogFormat = "json"
    """`json` (one object per line) or `console` (structlog's renderer, for people)."""
    log_file: str | None = None
    """A file that asynceval's events are appended to, one line each in LOG_FORMAT; unset =
    stderr."""

    def __init__(self, **values: Any) -> None:
        in_files = _dotenv_names(values)  # first: a file that is not text is one line, here
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(_explain(exc)) from None  # its repr would show values: a key
        _warn_unknown(os.environ, in_files)

    @field_validator("max_concurrent_llm_calls")
    @classmethod
    def _llm_calls_in_range(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"MAX_CONCURRENT_LLM_CALLS must be >= 1, got {value}")
        if value > MAX_LLM_CALLS_BOUND:
            raise ValueError(
                f"MAX_CONCURRENT_LLM_CALLS must be <= {MAX_LLM_CALLS_BOUND}, got {value}"
            )
        return value

    @field_validator(
        "retry_max_attempts",
        "max_concurrent_tasks",
        "max_parallel_tools",
        "llm_requests_per_minute",
        "llm_tokens_per_minute",
        "llm_cache_max_bytes",
        "llm_batch_size",
    )
    @classmethod
    def _at_least_one(cls, value: int | None, info: Any) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"{info.field_name.upper()} must be >= 1, got {value}")
        return value

    @field_validator("run_gc_threshold")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"RUN_GC_THRESHOLD must be >= 0 (0: leave the collector), got {value}")
        return value

    @field_validator(
        "retry_initial_delay",
        "retry_max_delay",
        "llm_call_timeout",
        "llm_stream_idle_timeout",
        "task_timeout",
        "loop_block_warn_s",
        "max_cost_usd",
        "llm_batch_poll",
    )
    @classmethod
    def _positive(cls, value: float | None, info: Any) -> float | None:
        if value is not None and not value > 0:
            raise ValueError(f"{info.field_name.upper()} must be > 0, got {value}")
        return value

    @field_validator("llm_hedge", mode="before")
    @classmethod
    def _hedge(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            if value not in ("off", "p95"):
                try:
                    value = float(value)
                except ValueError:
                    raise ValueError(
                        f"LLM_HEDGE must be off, p95 or a delay in seconds, got {value!r}"
                    ) from None
        if isinstance(value, bool) or (
            isinstance(value, int | float) and not (value > 0 and value != float("inf"))
        ):
            raise ValueError(f"LLM_HEDGE must be off, p95 or a delay in seconds > 0, got {value}")
        return value

    @field_validator("llm_batch_linger")
    @classmethod
    def _linger(cls, value: float) -> float:
        if not value >= 0.1 or value == float("inf"):
            raise ValueError(f"LLM_BATCH_LINGER must be >= 0.1 seconds, got {value}")
        return value

    @field_validator("llm_lane", mode="before")
    @classmethod
    def _lane(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("llm_hedge_budget")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"LLM_HEDGE_BUDGET must be from 0 to 1, got {value}")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return (value.strip().upper() or None) if isinstance(value, str) else value

    @field_validator("log_format", "llm_http_transport", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("llm_base_url")
    @classmethod
    def _http_url_without_credentials(cls, value: str | None) -> str | None:
        if value is None:
            return None
        scheme, _, rest = value.partition("://")
        host = rest.split("/", 1)[0]
        if scheme.lower() not in ("http", "https") or not host:
            raise ValueError(
                f"LLM_BASE_URL must be an http(s) URL such as https://host/v1, got {value!r}"
            )
        if "@" in host:  # never repeat the value: it holds a password
            raise ValueError(
                "LLM_BASE_URL must not hold credentials (user:password@): set LLM_API_KEY instead"
            )
        if "?" in value or "#" in value:  # every call would go to a wrong URL (a 404 each)
            base = value.split("?", 1)[0].split("#", 1)[0]  # never the query: it may hold a key
            raise ValueError(
                "LLM_BASE_URL must have no query string (?...) or fragment (#...): the API's "
                f"paths are added to it; give the base alone, such as {base}, and a key in "
                "LLM_API_KEY"
            )
        return value

    @field_validator("llm_prices_file")
    @classmethod
    def _a_file(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return os.path.abspath(os.path.expanduser(value))  # the same file for Dask's workers

    @field_validator("llm_cache_dir")
    @classmethod
    def _a_folder(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None  # empty: no cache, as an empty LLM_CACHE_DIR in the environment is
        path = os.path.expanduser(value)
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"LLM_CACHE_DIR must be a folder, got {value!r} (a file)")
        return os.path.abspath(path)  # the same folder after a chdir, and for a cluster's workers

    @model_validator(mode="after")
    def _max_delay_not_below_initial(self) -> Settings:
        if self.retry_max_delay < self.retry_initial_delay:
            raise ValueError(
                f"RETRY_MAX_DELAY must be >= RETRY_INITIAL_DELAY ({self.retry_initial_delay}), "
                f"got {self.retry_max_delay}"
            )
        return self

    def limits(self) -> dict[str, Any]:
        """The limits in force, as stated by the `run_started` event (FR-009)."""
        return {
            "max_concurrent_llm_calls": self.max_concurrent_llm_calls,
            "max_concurrent_tasks": self.max_concurrent_tasks,
            "retry_initial_delay": self.retry_initial_delay,
            "retry_max_delay": self.retry_max_delay,
            "retry_max_attempts": self.retry_max_attempts,
            "llm_call_timeout": self.llm_call_timeout,
            "llm_requests_per_minute": self.llm_requests_per_minute,
            "llm_tokens_per_minute": self.llm_tokens_per_minute,
            "llm_stream_idle_timeout": self.llm_stream_idle_timeout,
            "llm_hedge": self.llm_hedge,
            "llm_hedge_budget": self.llm_hedge_budget,
            "max_cost_usd": self.max_cost_usd,
            "llm_lane": self.llm_lane,
        }

    def public(self) -> dict[str, Any]:
        """Every setting as plain JSON values, the API key reduced to whether one is set."""
        data = self.model_dump(mode="json", exclude={"llm_api_key"})
        data["llm_api_key_set"] = self.llm_api_key is not None
        if self.llm_base_url:  # a query string may carry a key (?key=...): keep it out
            data["llm_base_url"] = self.llm_base_url.split("?", 1)[0]
        return data


_PREFIXES = ("MAX_", "RETRY_", "LLM_", "LOG_", "LOOP_", "TASK_", "BATCHING_", "RUN_GC_")
_KNOWN = tuple(name.upper() for name in Settings.model_fields)
# The registry of the unknown-name warnings (as a module's __warningregistry__ is): each is shown
# once per process under the default filter, however many Settings are built.
_WARNED: dict[Any, Any] = {}


def _dotenv_names(values: Mapping[str, Any]) -> dict[str, str]:
    """Each name set in the `.env` file(s) these Settings read, with where (`.env line 3`).

    The files are those pydantic-settings reads (`_env_file=` or `model_config`), parsed with
    python-dotenv's own parser, as pydantic-settings does; only regular files (a FIFO can be read
    once, and pydantic-settings reads it). A file that cannot be read, or is not text in its
    encoding, is a ConfigError naming it, never a traceback; its content is never repeated."""
    files = values.get("_env_file", Settings.model_config.get("env_file"))
    encoding: str = (
        values.get("_env_file_encoding")
        or Settings.model_config.get("env_file_encoding")
        or "utf-8"
    )
    if files is None:
        return {}
    if isinstance(files, str | os.PathLike):
        files = [files]
    from dotenv.parser import parse_stream  # pydantic-settings' own dependency

    names: dict[str, str] = {}
    for file in files:
        path = os.path.expanduser(os.fspath(file))
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding=encoding) as stream:
                for binding in parse_stream(stream):
                    if binding.key is not None:
                        names.setdefault(binding.key, f"{path} line {binding.original.line}")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not {encoding.upper()} text ({exc.reason} at byte {exc.start}), so "
                f"the settings in it cannot be read; save it as {encoding.upper()}"
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"{path}: cannot read the settings in it: {exc.strerror or exc}"
            ) from None
    return names


def _warn_unknown(environ: Mapping[str, str], in_files: Mapping[str, str]) -> None:
    """A warning for each name in the environment or a `.env` file that looks like a setting
    (one of our prefixes, or within two edits of a setting's name) but is none: a typo such as
    MAX_CONCURENT_LLM_CALLS would otherwise be ignored in silence. It names the closest
    setting; each is shown once per process (the default filter)."""
    found = [(name, "environment") for name in sorted(environ)] + list(in_files.items())
    for name, source in found:
        upper = name.upper()
        if upper in _KNOWN:
            continue
        close, near = _closest(upper)
        if not (near or upper.startswith(_PREFIXES)):
            continue
        where = "" if source == "environment" else f" in {source}"
        hint = f"; did you mean {close}?" if close else ""
        warnings.warn_explicit(
            f"{name}{where} is not an asynceval setting{hint}",
            UnknownSettingWarning,
            filename="<settings>",  # <...>: shown with no source line (it could hold a key)
            lineno=0,
            module=__name__,
            registry=_WARNED,
        )


@functools.lru_cache(maxsize=1024)
def _closest(name: str) -> tuple[str | None, bool]:
    """The setting closest to `name` (None if none is close), and whether it is within two
    edits (so `name` is taken for a misspelt setting, whatever its prefix)."""
    distance, nearest = min((_edits(name, known, 3), known) for known in _KNOWN)
    if distance <= 2:
        return nearest, True
    close = difflib.get_close_matches(name, _KNOWN, n=1, cutoff=0.6)
    return (close[0] if close else None), False


def _edits(a: str, b: str, cap: int) -> int:
    """The Levenshtein distance between `a` and `b`, or `cap` if it is `cap` or more (only the
    band of cells within `cap` of the diagonal is computed)."""
    if abs(len(a) - len(b)) >= cap:
        return cap
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i] + [cap] * len(b)
        for j in range(max(1, i - cap), min(len(b), i + cap) + 1):
            current[j] = min(
                previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != b[j - 1])
            )
        if min(current) >= cap:
            return cap
        previous = current
    return min(previous[-1], cap)


class UnknownSettingWarning(UserWarning):
    """A name in the environment or `.env` looks like an asynceval setting but is none (a
    typo)."""


def _explain(exc: ValidationError) -> str:
    """One line per bad value, each naming the environment variable and the value given."""
    lines = []
    for error in exc.errors():
        name = str(error["loc"][0]).upper() if error["loc"] else "SETTINGS"
        if error["type"] == "value_error":
            lines.append(str(error["ctx"]["error"]))
        else:
            message = error["msg"].removeprefix("Input ")
            lines.append(f"{name} {message}, got {error['input']!r}")
    # A key pasted into the wrong setting must not reach a terminal or a CI log in the error.
    return scrub_line("; ".join(lines))
