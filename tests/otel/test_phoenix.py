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
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest

from asynceval import Benchmark, OpenAIChatModel, Task

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

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

    def spans(self, project: str = PROJECT, trace_id: str | None = None) -> list[dict[str, Any]]:
        """Every span Phoenix holds for `project` (of one trace, if given), oldest first (REST,
        paged by cursor)."""
        spans: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000, "sort": "start_time", "order": "asc"}
        if trace_id is not None:
            params["trace_id"] = trace_id
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

    def wait_for_spans(
        self, count: int, project: str = PROJECT, trace_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The project's spans (of one trace, if given) once Phoenix has ingested at least
        `count` of them (it writes them to its database in batches, a moment after the
        exporter's request ended)."""
        deadline = time.monotonic() + 30
        while True:
            spans = self.spans(project, trace_id)
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


_shared: list[Phoenix] = []


def shared_phoenix(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Phoenix:
    """One Phoenix for the whole test session (each start costs about 10 s of CPU), started on
    first use and stopped at the session's end; its tests keep apart by project or trace id."""
    if not _shared:
        stack = ExitStack()
        _shared.append(stack.enter_context(phoenix_server(tmp_path_factory.mktemp("phoenix"))))
        config.add_cleanup(stack.close)
    return _shared[0]


@pytest.fixture
def phoenix(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Phoenix:
    return shared_phoenix(pytestconfig, tmp_path_factory)


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


def otlp_provider(phoenix: Phoenix, project: str = PROJECT) -> TracerProvider:
    """An SDK tracer provider whose batch processor exports to `phoenix` over OTLP/HTTP
    (protobuf), its spans in `project` (Phoenix reads the resource's
    `openinference.project.name`)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "asynceval", "openinference.project.name": project})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(phoenix.traces_endpoint)))
    return provider


@contextmanager
def global_tracer_provider(provider: TracerProvider) -> Iterator[None]:
    """`provider` as OpenTelemetry's global tracer provider in this block, as an application
    sets it (`trace.set_tracer_provider`); the one before it (none, usually) back after. The API
    sets its global once per process: this resets that, as opentelemetry-test-utils'
    `reset_trace_globals` does."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    try:
        yield
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


class TwoCalls(Benchmark):
    """Each repetition asks the simulated provider twice: a warm-up sum, then the task's query."""

    def __init__(self, model: OpenAIChatModel) -> None:
        super().__init__(n_task_repeats=2)
        self.model = model

    async def setup_agents(
        self, agent_data: Any, environment: Any, task: Task, user: Any
    ) -> tuple[list[Any], dict[str, Any]]:
        async def solver(query: str) -> str:
            await self.model.generate("What is 2 + 2?", agent="solver")
            return (await self.model.generate(query, agent="solver")).text.strip()

        return [solver], {"solver": solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Any, user: Any
    ) -> list[Any]:
        def exact(task: Task, answer: str, traces: Any) -> dict[str, Any]:
            return {"passed": answer == task.evaluation_data["expected"]}

        return [exact]


async def _run_two_calls(results: Path) -> list[dict[str, Any]]:
    tasks = [
        Task(query=f"What is {n} * 7?", id=f"times-{n}", evaluation_data={"expected": str(7 * n)})
        for n in range(3)
    ]
    async with OpenAIChatModel() as model:  # LLM_BASE_URL unset: the embedded simulator
        return await TwoCalls(model).run(tasks, results_path=results)


def test_a_run_in_phoenix_is_one_trace_run_repetitions_and_their_calls(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    """A run with the application's global SDK provider exporting to Phoenix: one
    `asynceval.run` span, an `asynceval.repetition` child per (task, repeat), a `chat
    asynceval-sim` child of its repetition per LLM call with its GenAI attributes and usage
    (which add up to the repetition's report), all read back from Phoenix."""
    provider = otlp_provider(phoenix)
    with global_tracer_provider(provider):
        reports = anyio.run(_run_two_calls, tmp_path / "results.jsonl")
        assert provider.force_flush()
    provider.shutdown()
    assert len(reports) == 6
    calls = sum(report["usage"]["llm_calls"] for report in reports)
    assert calls == 12

    spans = phoenix.wait_for_spans(1 + 6 + calls)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert sorted(by_name) == ["asynceval.repetition", "asynceval.run", "chat asynceval-sim"]

    (run,) = by_name["asynceval.run"]
    assert run["parent_id"] is None
    assert run["attributes"]["asynceval.run_id"] == reports[0]["run_id"]
    assert run["attributes"]["asynceval.repetitions"] == 6
    trace_id = run["context"]["trace_id"]
    assert {span["context"]["trace_id"] for span in spans} == {trace_id}

    reports_by_key = {(r["task_id"], r["repeat_idx"]): r for r in reports}
    repetitions: dict[str, dict[str, Any]] = {}
    for span in by_name["asynceval.repetition"]:
        assert span["parent_id"] == run["context"]["span_id"]
        attributes = span["attributes"]
        key = (attributes["asynceval.task_id"], attributes["asynceval.repeat_idx"])
        assert attributes["asynceval.status"] == "success"
        assert [event["name"] for event in span["events"]] == ["gen_ai.evaluation.result"]
        repetitions[span["context"]["span_id"]] = {"key": key, "calls": []}
    keys = sorted(repetition["key"] for repetition in repetitions.values())
    assert keys == sorted(reports_by_key)  # one span per (task, repeat)

    for span in by_name["chat asynceval-sim"]:
        attributes = span["attributes"]
        assert span["parent_id"] in repetitions
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "asynceval-sim"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        repetitions[span["parent_id"]]["calls"].append(attributes)
    for repetition in repetitions.values():
        usage = reports_by_key[repetition["key"]]["usage"]
        assert len(repetition["calls"]) == usage["llm_calls"] == 2
        inputs = sum(call["gen_ai.usage.input_tokens"] for call in repetition["calls"])
        outputs = sum(call["gen_ai.usage.output_tokens"] for call in repetition["calls"])
        assert (inputs, outputs) == (usage["prompt_tokens"], usage["completion_tokens"])
