"""Now, in UTC, as the text of the lines written for every repetition (event timestamps, the
traces' and configs' metadata): the date and time of day are formatted once a second, not per
line, from one reading of the clock."""

from __future__ import annotations

import time

_second: tuple[int, str] = (-1, "")


def utc_now() -> tuple[str, int]:
    """(`YYYY-MM-DDTHH:MM:SS` of now in UTC, the microseconds past that second)."""
    global _second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _second  # read once: another thread may replace it
    if cached[0] != seconds:
        cached = _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return cached[1], micros


def utc_timestamp() -> str:
    """Now as ISO 8601 UTC with microseconds and a Z (event lines; `utc_now` inlined, as every
    event line reads it)."""
    global _second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached = _second
    if cached[0] != seconds:
        cached = _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{cached[1]}.{micros:06d}Z"


def utc_isoformat() -> str:
    """`datetime.now(UTC).isoformat()`'s text (traces' and configs' metadata)."""
    day, micros = utc_now()
    return f"{day}.{micros:06d}+00:00" if micros else f"{day}+00:00"
