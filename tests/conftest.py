"""Shared fixtures: a clean settings environment and a captured event log per test."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from asynceval import Settings, configure_logging

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
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def sim_server() -> Iterator[Any]:
    """Start `asynceval sim serve ARGS...` on a free loopback port; returns its base URL (…/v1)."""
    import subprocess
    import sys
    import time

    import httpx

    processes: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> str:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "asynceval.cli", "sim", "serve", "--port", str(port), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        processes.append(process)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"sim serve exited: {process.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5)
                return f"http://127.0.0.1:{port}/v1"
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("sim serve did not start within 15 s")

    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
