"""Shared fixtures: a clean settings environment and a captured event log per test."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from asynceval import Settings, configure_logging
from asynceval.runtime import set_process_default
from asynceval.sim import SimConfig, SimProvider

SETTING_VARS = [name.upper() for name in Settings.model_fields]


class EventLog:
    """The JSON events written during one test, parsed back."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def lines(self) -> list[str]:
        return [line for line in self.stream.getvalue().splitlines() if line.strip()]

    def all(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]

    def named(self, name: str) -> list[dict[str, Any]]:
        return [event for event in self.all() if event["event"] == name]

    def max_in_flight(self) -> int:
        """Replay +1 per acquired and -1 per released in log order (SC-002)."""
        current = peak = 0
        for event in self.all():
            if event["event"] == "acquired":
                current += 1
            elif event["event"] == "released":
                current -= 1
            peak = max(peak, current)
        return peak


@pytest.fixture(autouse=True)
def clean_settings_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Tests see no setting from the machine's environment or a stray .env."""
    for name in SETTING_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def event_log() -> EventLog:
    """Every test's events go to a buffer it can read, at DEBUG."""
    stream = io.StringIO()
    configure_logging(Settings(log_level="DEBUG"), stream=stream)
    return EventLog(stream)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def asgi_server() -> Iterator[Callable[[Any], int]]:
    """`asgi_server(app)` serves an ASGI app on a free loopback port for this test; its port."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def serve(app: Any) -> int:
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.02)
        return port

    yield serve
    for server, thread in servers:
        server.should_exit = True
        thread.join(5)


@pytest.fixture
def loopback(
    asgi_server: Callable[[Any], int],
) -> Callable[[SimConfig], tuple[str, SimProvider]]:
    """`loopback(config)` serves a new SimProvider on 127.0.0.1 in this process (in-process
    ASGI buffers whole responses, so streams need a real socket); (base URL .../v1, provider)."""

    def start(config: SimConfig) -> tuple[str, SimProvider]:
        sim = SimProvider(config)
        return f"http://127.0.0.1:{asgi_server(sim)}/v1", sim

    return start


def start_sim_server(*args: str) -> tuple[str, subprocess.Popen[bytes]]:
    """Start `asynceval sim serve ARGS...` on a free loopback port; (its base URL …/v1, process)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "asynceval.cli", "sim", "serve", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"sim serve exited: {stderr}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5)
            return f"http://127.0.0.1:{port}/v1", process
        except httpx.TransportError:
            time.sleep(0.05)
    stop_sim_server(process)
    raise RuntimeError("sim serve did not start within 15 s")


def stop_sim_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


@pytest.fixture
def sim_server() -> Iterator[Callable[..., str]]:
    """A factory: `sim_server(*args)` starts a server for this test and returns its base URL."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> str:
        base_url, process = start_sim_server(*args)
        processes.append(process)
        return base_url

    yield start
    for process in processes:
        stop_sim_server(process)


@pytest.fixture(autouse=True)
def fresh_default_runtime() -> Iterator[None]:
    """Each test starts with no process-default Runtime, so it sees the environment it set up."""
    set_process_default()
    yield
    set_process_default()
