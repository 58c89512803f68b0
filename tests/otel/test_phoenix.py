"""A run's traces in a real OpenTelemetry backend: Arize Phoenix, started as a subprocess on free
ports with a working directory of its own, receives the spans over OTLP (http/protobuf) and gives
them back through its REST API (`/v1/projects/{project}/spans`).

Phoenix is not in the dev extra (it pins `anthropic<2`, the dev extra needs `>=2.14`, and it
brings about 70 packages): `.ci/run` installs it into `.venv-phoenix` and sets `ASYNCEVAL_PHOENIX`
to its `phoenix` command. Without that variable (a local run) these tests are skipped.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

PHOENIX = os.environ.get("ASYNCEVAL_PHOENIX", "")
PROJECT = "asynceval-tests"

pytestmark = pytest.mark.skipif(
    not PHOENIX,
    reason="ASYNCEVAL_PHOENIX is unset: the path of a `phoenix` command (Arize Phoenix, "
    "pip install arize-phoenix in a venv of its own; .ci/run installs it in .venv-phoenix)",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Phoenix:
    """A running Phoenix: its UI and REST API at `url`, OTLP over HTTP at `url`/v1/traces."""

    url: str
    log: Path

    @property
    def traces_endpoint(self) -> str:
        return f"{self.url}/v1/traces"

    def spans(self, project: str = PROJECT) -> list[dict[str, Any]]:
        """Every span Phoenix holds for `project`, oldest first (REST, paged by cursor)."""
        spans: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000, "sort": "start_time", "order": "asc"}
        while True:
            answer = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=params, timeout=10)
            if answer.status_code == 404:  # no span of the project ingested yet
                return []
            answer.raise_for_status()
            body = answer.json()
            spans.extend(body["data"])
            if not body.get("next_cursor"):
                return spans
            params["cursor"] = body["next_cursor"]

    def wait_for_spans(self, count: int, project: str = PROJECT) -> list[dict[str, Any]]:
        """The project's spans once Phoenix has ingested at least `count` of them (it writes
        them to its database in batches, a moment after the exporter's request ended)."""
        deadline = time.monotonic() + 30
        while True:
            spans = self.spans(project)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)


@contextmanager
def phoenix_server(working_dir: Path) -> Iterator[Phoenix]:
    """`phoenix serve` on free loopback ports with `working_dir` for its SQLite database; stopped
    (its process group) on exit. Its assistant's tools and its usage telemetry are off: nothing
    in it needs the internet."""
    assert PHOENIX, "ASYNCEVAL_PHOENIX is unset"
    working_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(working_dir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_AGENTS_DISABLE_BASH": "true",
        "PHOENIX_AGENTS_DISABLE_WEB_ACCESS": "true",
        "PHOENIX_AGENTS_DISABLE_GITHUB": "true",
    }
    log = working_dir / "phoenix.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [PHOENIX, "serve"],
            cwd=working_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    phoenix = Phoenix(url=f"http://127.0.0.1:{port}", log=log)
    try:
        deadline = time.monotonic() + 90  # about 10 s here, most of it Phoenix's imports
        while True:
            if process.poll() is not None:
                pytest.fail(f"phoenix serve exited {process.returncode}:\n{_tail(log)}")
            try:
                if httpx.get(f"{phoenix.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"phoenix serve was not up after 90 s:\n{_tail(log)}")
            time.sleep(0.2)
        yield phoenix
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def test_phoenix_gives_back_the_spans_the_otlp_exporter_sent(phoenix: Phoenix) -> None:
    """The harness itself: a parent and a child span sent by the SDK's OTLP/HTTP exporter come
    back through Phoenix's REST API with their names, parent and attributes."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": "harness"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(phoenix.traces_endpoint)))
    tracer = provider.get_tracer("tests.otel.test_phoenix")
    with (
        tracer.start_as_current_span("parent") as parent,
        tracer.start_as_current_span("child", attributes={"n": 7}),
    ):
        pass
    assert provider.force_flush()
    provider.shutdown()

    spans = {span["name"]: span for span in phoenix.wait_for_spans(2, project="harness")}
    assert set(spans) == {"parent", "child"}
    assert spans["parent"]["parent_id"] is None
    assert spans["parent"]["context"]["span_id"] == f"{parent.get_span_context().span_id:016x}"
    assert spans["child"]["parent_id"] == spans["parent"]["context"]["span_id"]
    assert spans["child"]["attributes"]["n"] == 7
