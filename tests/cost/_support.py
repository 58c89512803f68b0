"""What the cost tests share: price files, the events of a run, the money they add up to, and a
benchmark whose agents make model calls of a given shape."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.sim import SimConfig

MODEL = "cost-test-model"
"""A model of the tests' own: served by the simulator, priced only by the tests' price files."""
PRICE: dict[str, float] = {"input_mtok": 0.25, "output_mtok": 40.0, "cache_read_mtok": 0.125}
"""Its price: output dearest, so that a call's worst case (its body's bytes as prompt tokens,
plus max_tokens) is close to what it really costs (the simulator answers max_tokens tokens to
`QUESTION`), and a budget is reached after a known share of the calls."""
UNPRICED = "cost-test-unpriced-zq9"
"""A model nobody prices (not in genai-prices' data, not in any price file)."""
QUESTION = "Describe task number {i} in one long sentence, with every detail of it you know."
"""A question the simulator echoes in more than 16 tokens (so max_tokens=16 is reached)."""
FAST = SimConfig(latency=0.002)


def price_file(path: Path, prices: Mapping[str, Mapping[str, float]]) -> Path:
    """`prices` written as JSON, or as YAML when `path` ends in .yaml; `path`."""
    if path.suffix == ".yaml":
        lines = []
        for model, rates in prices.items():
            lines.append(f"{model}:")
            lines.extend(f"  {key}: {value}" for key, value in rates.items())
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(prices), encoding="utf-8")
    return path


def events_file(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a run's events.jsonl."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def named(events: Iterable[Mapping[str, Any]], name: str) -> list[dict[str, Any]]:
    return [dict(e) for e in events if e["event"] == name]


def exact(values: Iterable[float | None]) -> Decimal:
    """The exact sum of costs as they were written (None counts as nothing)."""
    return sum((Decimal(repr(v)) for v in values if v is not None), Decimal(0))


def released_cost(events: Iterable[Mapping[str, Any]]) -> Decimal:
    """What every `released` event of a model request says it cost, added exactly."""
    return exact(e.get("cost_usd") for e in named(events, "released"))


def by_repetition(
    events: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The `released` events of each (task_id, repeat_idx)."""
    found: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for event in named(events, "released"):
        found[(event["task_id"], event["repeat_idx"])].append(event)
    return found


def token_cost(
    prices: Mapping[str, float], prompt: int, completion: int, cached: int = 0, written: int = 0
) -> float:
    """What `prompt` prompt tokens (`cached` of them read from, `written` written to the
    provider's cache) and `completion` completion tokens cost at `prices`, as the tests reckon
    it: tokens times USD per million."""
    rate = {key: Decimal(repr(value)) for key, value in prices.items()}
    plain = prompt - cached - written
    total = plain * rate["input_mtok"] + completion * rate["output_mtok"]
    total += cached * rate.get("cache_read_mtok", rate["input_mtok"])
    total += written * rate.get("cache_write_mtok", rate["input_mtok"])
    return float(total / 1_000_000)


def tasks(n: int, prefix: str = "t") -> list[Task]:
    return [Task(query=QUESTION.format(i=i), id=f"{prefix}{i}") for i in range(n)]


Agent = Callable[[str], Any]


class Calls(Benchmark):
    """Each repetition's agent makes `calls` calls of `model` (max_tokens=16 unless `params`
    say otherwise) on the embedded simulator (`sim`), or on what `make_model` builds."""

    def __init__(
        self,
        model: str = MODEL,
        *,
        calls: int = 1,
        params: Mapping[str, Any] | None = None,
        sim: SimConfig = FAST,
        price: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.calls = calls
        self.params = dict(params) if params is not None else {"max_tokens": 16}
        self.sim = sim
        self.price = price
        self._model: OpenAIChatModel | None = None

    def make_model(self) -> OpenAIChatModel:
        """The repetitions' model: one for the whole run (so one simulator counts every
        request: `self.sim_stats()`)."""
        if self._model is None or self._model.model != self.model:
            self._model = OpenAIChatModel(self.model, sim_config=self.sim, price=self.price)
        return self._model

    def sim_stats(self) -> dict[str, Any]:
        """The counters of the simulator the last model answered from."""
        assert self._model is not None and self._model.sim is not None
        return self._model.sim.stats()

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = self.make_model()

        async def solver(query: str) -> str:
            texts = [(await model.generate(query, **self.params)).text for _ in range(self.calls)]
            return texts[-1]

        return [solver], {}
