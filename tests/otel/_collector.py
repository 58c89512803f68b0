"""A tiny OTLP/HTTP collector on loopback for the tests: it counts the POSTs to each path and
keeps the spans of every `/v1/traces` export (decoded with opentelemetry-proto)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Collector:
    """`with Collector() as c:` serves on `c.endpoint` (for OTEL_EXPORTER_OTLP_ENDPOINT)."""

    def __init__(self) -> None:
        self.posts: Counter[str] = Counter()
        self.spans: list[Any] = []  # opentelemetry.proto.trace.v1.Span messages
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                collector._received(self.path, body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _received(self, path: str, body: bytes) -> None:
        spans = []
        if path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
        with self._lock:
            self.posts[path] += 1
            self.spans.extend(spans)

    def named(self, name: str) -> list[Any]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def wait_for(self, name: str, count: int, timeout: float = 20.0) -> list[Any]:
        """The spans named `name` once at least `count` came (or the timeout passed)."""
        deadline = time.monotonic() + timeout
        while len(self.named(name)) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.named(name)

    def __enter__(self) -> Collector:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
