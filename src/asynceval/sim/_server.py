"""serve(): run the simulated provider on a real socket under uvicorn (`asynceval sim serve`)."""

from __future__ import annotations

import importlib.util

from asynceval.sim._app import SimProvider
from asynceval.sim._config import SimConfig

_GRACEFUL_SHUTDOWN_S = 1
"""Hanging requests never finish by themselves; shutdown cancels them after this long."""


def serve(
    config: SimConfig | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
) -> None:
    """Serve a `SimProvider` for `config` on `host:port` until interrupted (blocking).

    Uses httptools when it is installed (uvicorn's faster parser), h11 otherwise; no access log.
    """
    import uvicorn

    http = "auto" if importlib.util.find_spec("httptools") is not None else "h11"
    uvicorn.run(
        SimProvider(config),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        http=http,
        lifespan="on",
        timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_S,
    )
