"""The smolagents adapter: real smolagents agents on AsyncEvalModel against the simulated provider.

The simulated model calls the offered tools first, leaving smolagents' `final_answer` tool for
last: once the tools' results come back (smolagents sends them as a user message starting with
"Observation:"), it calls `final_answer` alone with an answer that carries those results.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
import httpx
from smolagents import ChatMessage, MessageRole, Tool, ToolCallingAgent
from smolagents.models import get_tool_json_schema
from smolagents.monitoring import LogLevel

from asynceval import Benchmark, OpenAIChatModel, Settings, Task
from asynceval.agents import SyncAgent
from asynceval.agents.smolagents import AsyncEvalModel
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog


class WeatherTool(Tool):
    """A custom tool that records the cities it was asked about."""

    name = "get_weather"
    description = "The weather forecast for a city."
    inputs = {"city": {"type": "string", "description": "The city's name."}}  # noqa: RUF012
    output_type = "string"

    def __init__(self) -> None:
        super().__init__()
        self.cities: list[str] = []
        self._lock = threading.Lock()

    def forward(self, city: str) -> str:
        with self._lock:
            self.cities.append(city)
        return f"Sunny in {city}, 21 C"


class SmolBench(Benchmark):
    """A fresh ToolCallingAgent per repetition, with one WeatherTool shared by all."""

    def __init__(self, model: OpenAIChatModel) -> None:
        super().__init__(max_concurrent_tasks=3)
        self.smol_model = AsyncEvalModel(model)
        self.weather = WeatherTool()

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        agent = ToolCallingAgent(
            tools=[self.weather],
            model=self.smol_model,
            max_steps=4,
            verbosity_level=LogLevel.OFF,
        )
        forecaster = SyncAgent(agent, name="forecaster")
        return [forecaster], {"forecaster": forecaster}


async def test_a_tool_calling_agent_completes_a_tool_using_task_in_a_benchmark(
    event_log: EventLog,
) -> None:
    tasks = [Task(query=f"What is the weather in {city}?", id=city) for city in ("rome", "oslo")]
    async with OpenAIChatModel(settings=Settings(), sim_config=SimConfig(latency=0.01)) as model:
        bench = SmolBench(model)
        reports = await bench.run(tasks)
    assert [r["status"] for r in reports] == ["success", "success"]
    assert len(bench.weather.cities) == 2  # the tool ran once per task
    for report in reports:
        # one tool step, then smolagents' final-answer call: two calls through the limit
        assert report["usage"]["llm_calls"] == 2
        assert report["usage"]["prompt_tokens"] > 0
        assert report["traces"]["agents"]["forecaster"]["calls"] == 1
        assert report["config"]["agents"]["forecaster"]["type"] == (
            "smolagents.agents.ToolCallingAgent"
        )
    acquired, released = event_log.named("acquired"), event_log.named("released")
    assert len(acquired) == len(released) == 4
    assert {e["agent"] for e in acquired + released} == {"forecaster"}
    assert {e["call_id"] for e in acquired} == {e["call_id"] for e in released}
    assert sorted(e["task_id"] for e in acquired) == ["oslo", "oslo", "rome", "rome"]


async def test_the_answer_carries_the_tool_observation() -> None:
    weather = WeatherTool()
    async with OpenAIChatModel(settings=Settings(), sim_config=SimConfig(latency=0)) as model:
        agent = ToolCallingAgent(
            tools=[weather],
            model=AsyncEvalModel(model, agent="direct"),
            max_steps=4,
            verbosity_level=LogLevel.OFF,
        )
        answer = await anyio.to_thread.run_sync(agent.run, "What is the weather in Rome?")
    (city,) = weather.cities
    assert f"Sunny in {city}, 21 C" in str(answer)
    action, final = agent.memory.steps[1:]
    assert action.error is None and [c.name for c in action.tool_calls] == ["get_weather"]
    assert action.token_usage.input_tokens > 0
    assert final.error is None and final.is_final_answer  # the agent ended by itself
    assert [c.name for c in final.tool_calls] == ["final_answer"]


async def test_the_final_answer_tool_alone_ends_the_run_in_one_call(event_log: EventLog) -> None:
    async with OpenAIChatModel(settings=Settings(), sim_config=SimConfig(latency=0)) as model:
        agent = ToolCallingAgent(
            tools=[], model=AsyncEvalModel(model, agent="finisher"), verbosity_level=LogLevel.OFF
        )
        answer = await anyio.to_thread.run_sync(agent.run, "Say something.")
    step = agent.memory.steps[-1]
    assert step.is_final_answer and step.error is None
    (call,) = step.tool_calls
    assert call.name == "final_answer" and answer == call.arguments["answer"] != ""
    assert [e["agent"] for e in event_log.named("acquired")] == ["finisher"]


class Recorder:
    """An ASGI app in front of the simulated provider that keeps every request body."""

    def __init__(self, app: SimProvider) -> None:
        self.app = app
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []

        async def recording_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.bodies.append(json.loads(b"".join(chunks)))
            return message

        return await self.app(scope, recording_receive, send)


def _recorded_model(model_name: str) -> tuple[OpenAIChatModel, Recorder]:
    recorder = Recorder(SimProvider(SimConfig(latency=0)))
    model = OpenAIChatModel(
        model_name,
        base_url="http://sim.test/v1",
        settings=Settings(),
        transport=httpx.ASGITransport(app=recorder),
    )
    return model, recorder


async def test_smolagents_messages_and_tools_become_an_openai_request(
    event_log: EventLog,
) -> None:
    weather = WeatherTool()
    messages: list[Any] = [
        ChatMessage(role=MessageRole.SYSTEM, content="You forecast."),
        {"role": "user", "content": "Rome?"},
        {"role": "user", "content": [{"type": "text", "text": "Today, please."}]},
        ChatMessage(
            role=MessageRole.TOOL_CALL,
            content=[{"type": "text", "text": "Calling tools: get_weather(Rome)"}],
        ),
        ChatMessage(
            role=MessageRole.TOOL_RESPONSE,
            content=[{"type": "text", "text": "Observation: Sunny"}],
        ),
    ]
    model, recorder = _recorded_model("sim-model")
    smol = AsyncEvalModel(model, agent="probe", dimension="step-1", parallel_tool_calls=False)
    async with model:
        with_tools = await anyio.to_thread.run_sync(
            lambda: smol.generate(messages, ["Observation:"], tools_to_call_from=[weather])
        )
        plain = await anyio.to_thread.run_sync(lambda: smol(messages[:3]))
    first, second = recorder.bodies
    assert first["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "You forecast."}]},
        {"role": "user", "content": [{"type": "text", "text": "Rome?\nToday, please."}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Calling tools: get_weather(Rome)"}],
        },
        {"role": "user", "content": [{"type": "text", "text": "Observation: Sunny"}]},
    ]
    assert first["tools"] == [get_tool_json_schema(weather)]
    assert first["tool_choice"] == "required" and first["parallel_tool_calls"] is False
    assert first["stop"] == ["Observation:"] and first["model"] == "sim-model"
    # A request without tools carries no tool-only parameters.
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(second)

    # The observation is the tool's result, so the simulated model answers in text with it.
    assert with_tools.role == MessageRole.ASSISTANT and with_tools.tool_calls is None
    assert "Observation: Sunny" in with_tools.content
    assert with_tools.token_usage.input_tokens > 0 and with_tools.token_usage.output_tokens > 0
    assert plain.tool_calls is None and plain.content.startswith("Simulated answer: Rome?")
    labels = {(e["agent"], e["dimension"]) for e in event_log.named("acquired")}
    assert labels == {("probe", "step-1")}


async def test_stop_sequences_are_applied_here_for_models_without_the_stop_parameter() -> None:
    model, recorder = _recorded_model("gpt-5")  # smolagents: no `stop` for the gpt-5 family
    smol = AsyncEvalModel(model)
    async with model:
        message = await anyio.to_thread.run_sync(
            lambda: smol.generate([{"role": "user", "content": "one STOP two"}], ["STOP"])
        )
    assert "stop" not in recorder.bodies[0]
    assert message.content == "Simulated answer: one "


async def test_a_failed_llm_call_fails_the_repetition_with_its_cause() -> None:
    config = SimConfig(latency=0, fault_rates={400: 1.0})  # refused: not retried
    async with OpenAIChatModel(settings=Settings(), sim_config=config) as model:
        (report,) = await SmolBench(model).run([Task(query="Weather in Rome?", id="rome")])
    assert report["status"] == "unknown_execution_error"
    assert report["error"]["type"] == "AgentGenerationError"  # smolagents' wrapper
    assert "LLMCallFailed" in report["error"]["traceback"]  # ... of our failure, as its cause
    assert report["usage"]["llm_calls"] == 1 and report["usage"]["failed_calls"] == 1
    assert report["attempts"] == 1  # a refused request is not an infrastructure failure


def test_without_smolagents_the_adapter_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['smolagents'] = None\n"  # as if it were not installed
        "import asynceval.agents\n"
        "print(asynceval.agents.SyncAgent.__name__)\n"
        "try:\n"
        "    import asynceval.agents.smolagents\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    first, second = done.stdout.splitlines()
    assert first == "SyncAgent"
    assert "pip install 'asynceval[smolagents]'" in second
