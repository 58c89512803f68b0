"""Parallel tool calls: read-only tools run at once, a write orders the read after it (seed 001).

A briefing agent gets "Brief me on CITY". Its model is offered five tools: three read-only
lookups (`get_weather`, `get_population`, `lookup_time`), `write_note` (writes the resource
"notes") and `read_notes` (reads "notes"), and asks for several of them in one turn (the simulated
provider asks for every offered tool at once). The agent runs the model's calls with a
`ToolExecutor`, sends the results back and gets the final answer from a second model call.

The executor runs the three lookups and `write_note` together (they touch no resource in
common), then `read_notes` alone once the write has ended, so it sees the note. Each lookup waits
0.2 s on its "service" and each note operation 0.05 s, so the turn's tools take about 0.25 s
instead of the 0.7 s they would take one after another. `lookup_time` is a plain `def`: the
executor runs it in a worker thread, next to the async ones.

The environment records when each tool call starts and ends; its traces (`tool_events`, with the
time of each turn's tools) are in every report. With LOG_LEVEL=DEBUG the executor also writes a
`tool_wave` event per group of calls it ran together. Runs on the embedded simulated provider
unless LLM_BASE_URL / LLM_MODEL / LLM_API_KEY point elsewhere.

    asynceval run examples/parallel_tools.py
    LOG_LEVEL=DEBUG asynceval run examples/parallel_tools.py   # and look for tool_wave events
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import anyio

from asynceval import Benchmark, OpenAIChatModel, Task, Tool, ToolExecutor
from asynceval.llm import ToolCall

SERVICE_LATENCY_S = 0.2
MAX_ROUNDS = 4  # model calls per task at most: tool rounds, then the answer

CITIES: dict[str, dict[str, Any]] = {
    "Paris": {"weather": "light rain, 12 °C", "population": 2_102_650, "utc_offset": 1},
    "Tokyo": {"weather": "clear, 9 °C", "population": 14_094_034, "utc_offset": 9},
    "Lima": {"weather": "overcast, 19 °C", "population": 10_151_200, "utc_offset": -5},
    "Nairobi": {"weather": "sunny, 24 °C", "population": 4_397_073, "utc_offset": 3},
}

SYSTEM = (
    "You write short city briefings. Use the tools to look up the facts (call the ones you need "
    "in one turn), keep a note of what you found, then answer."
)


class CityDesk:
    """The task's environment: the services the tools query, the notes, and a log of tool calls."""

    def __init__(self, cities: Mapping[str, Mapping[str, Any]]) -> None:
        self.cities = {name: dict(facts) for name, facts in cities.items()}
        self.notes: list[str] = []
        self.tool_events: list[dict[str, Any]] = []
        self._started = time.monotonic()
        self._lock = threading.Lock()  # lookup_time logs from a worker thread

    def facts(self, city: str) -> dict[str, Any]:
        """What the services know about `city`; an unknown city is the tool's error result."""
        if city not in self.cities:
            raise ValueError(f"no data for {city!r} (known: {', '.join(sorted(self.cities))})")
        return self.cities[city]

    def _log(self, kind: str, tool: str) -> None:
        with self._lock:
            self.tool_events.append(
                {
                    "event": kind,
                    "tool": tool,
                    "t": round(time.monotonic() - self._started, 4),
                    "thread": threading.current_thread().name,
                }
            )

    async def get_weather(self, city: str) -> str:
        self._log("start", "get_weather")
        await anyio.sleep(SERVICE_LATENCY_S)  # an HTTP call to a weather service
        self._log("end", "get_weather")
        return f"Weather in {city}: {self.facts(city)['weather']}"

    async def get_population(self, city: str) -> str:
        self._log("start", "get_population")
        await anyio.sleep(SERVICE_LATENCY_S)
        self._log("end", "get_population")
        return f"Population of {city}: {self.facts(city)['population']:,}"

    def lookup_time(self, city: str) -> str:
        """Blocking, as many client libraries are: the executor runs it in a worker thread."""
        self._log("start", "lookup_time")
        time.sleep(SERVICE_LATENCY_S)
        offset = int(self.facts(city)["utc_offset"])
        now = datetime.now(UTC).astimezone(timezone(timedelta(hours=offset)))
        self._log("end", "lookup_time")
        return f"Local time in {city}: {now:%H:%M} (UTC{offset:+d})"

    async def write_note(self, text: str) -> str:
        self._log("start", "write_note")
        await anyio.sleep(0.05)
        self.notes.append(text)
        self._log("end", "write_note")
        return f"Noted ({len(self.notes)} notes)"

    async def read_notes(self) -> list[str]:
        self._log("start", "read_notes")
        await anyio.sleep(0.05)
        notes = list(self.notes)
        self._log("end", "read_notes")
        return notes

    def tools(self) -> list[Tool]:
        city = {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": sorted(self.cities)}},
            "required": ["city"],
        }
        note = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        return [
            Tool(
                "get_weather",
                self.get_weather,
                read_only=True,
                description="Current weather of a city.",
                parameters=city,
            ),
            Tool(
                "get_population",
                self.get_population,
                read_only=True,
                description="Population of a city.",
                parameters=city,
            ),
            Tool(
                "lookup_time",
                self.lookup_time,
                read_only=True,
                description="Local time in a city.",
                parameters=city,
            ),
            Tool(
                "write_note",
                self.write_note,
                writes=["notes"],
                description="Add a note to the briefing notes.",
                parameters=note,
            ),
            Tool(
                "read_notes",
                self.read_notes,
                reads=["notes"],
                description="Read every note taken so far.",
            ),
        ]

    def gather_traces(self) -> dict[str, Any]:
        return {"notes": list(self.notes), "tool_events": list(self.tool_events)}


class BriefingAgent:
    """Asks the model, runs the tool calls it asks for with a ToolExecutor, returns its answer."""

    def __init__(self, model: OpenAIChatModel, executor: ToolExecutor) -> None:
        self.model = model
        self.executor = executor
        self.rounds: list[dict[str, Any]] = []

    async def run(self, query: str) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": query},
        ]
        text = ""
        for _ in range(MAX_ROUNDS):
            completion = await self.model.generate(
                messages, tools=self.executor.openai_schemas(), agent="briefer"
            )
            text = completion.text
            if not completion.tool_calls:
                break
            messages.append(assistant_message(completion.text, completion.tool_calls))
            started = time.monotonic()
            results = await self.executor.run(completion.tool_calls)
            self.rounds.append(
                {
                    "tools": [call.name for call in completion.tool_calls],
                    "elapsed_s": round(time.monotonic() - started, 4),
                    "errors": [r["content"] for r in results if r["is_error"]],
                }
            )
            messages += [
                {"role": "tool", "tool_call_id": r["tool_call_id"], "content": r["content"]}
                for r in results
            ]
        return text

    def gather_traces(self) -> dict[str, Any]:
        return {"tool_rounds": list(self.rounds)}


def assistant_message(text: str, calls: tuple[ToolCall, ...]) -> dict[str, Any]:
    """The model's tool-calling turn, as it goes back into the conversation (OpenAI shape)."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in calls
        ],
    }


class ParallelTools(Benchmark):
    """One briefing per city; two model calls and one round of five tool calls each."""

    def __init__(self) -> None:
        super().__init__()
        self.model: OpenAIChatModel | None = None

    def default_tasks(self) -> list[Task]:
        return [
            Task(
                query=f"Brief me on {city}: the weather, how many people live there, local time.",
                id=city.lower(),
                environment_data={"cities": {city: facts}},
                evaluation_data={"city": city},
            )
            for city, facts in CITIES.items()
        ]

    async def setup_environment(self, agent_data: Mapping[str, Any], task: Task) -> CityDesk:
        return CityDesk(task.environment_data["cities"])

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.model is None:  # built on first use, when the run's settings are known
            self.model = OpenAIChatModel(settings=self.settings)
        assert isinstance(environment, CityDesk)
        agent = BriefingAgent(self.model, ToolExecutor(environment.tools(), settings=self.settings))
        return [agent], {"briefer": agent}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        assert isinstance(environment, CityDesk)
        facts = environment.cities[task.evaluation_data["city"]]

        async def grounded(task: Task, answer: str, traces: Any) -> dict[str, Any]:
            """The briefing states the weather and population the services gave."""
            expected = {
                "weather": str(facts["weather"]),
                "population": f"{facts['population']:,}",
            }
            found = {name: value in answer for name, value in expected.items()}
            return {"passed": all(found.values()), "found": found}

        return [grounded]


benchmark = ParallelTools
