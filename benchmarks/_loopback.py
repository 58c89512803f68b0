"""A provider of a benchmark's own on a real loopback socket: uvicorn in a daemon thread, on a
free port (shared by the scripts that need one; `asynceval.sim.serve` serves the simulator)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


def serve(app: Any) -> tuple[int, uvicorn.Server]:
    """Serve the ASGI `app` on 127.0.0.1 from a daemon thread; returns once it accepts, with its
    port and the server (`server.should_exit = True` stops it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return port, server
