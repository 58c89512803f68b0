"""Hedging the slow tail (LLM_HEDGE=p95 against off), measured side by side in one run.

The simulated provider answers with heavy-tailed latency: lognormal, median 50 ms, sigma 1.29
(p99 about 20 times the median, about 1 s), in process. N calls (400) at MAX_CONCURRENT_LLM_CALLS
= L (20), made by C callers (16) each calling in turn, so that a few slots are free for hedges
(a hedge never goes ahead of a caller waiting in line: with every slot busy, nothing is hedged).
Each round runs the same N requests twice, with LLM_HEDGE=off and with LLM_HEDGE=p95 (default
LLM_HEDGE_BUDGET, 5%), each in a fresh Runtime (its own learned p95 and budget) against a fresh
provider with the same seed: each request's first latency is the same in both, so the difference
is the hedges'. Printed per round: call latency p50 / p95 / p99 / max of each, the p99 change,
and the extra requests the provider saw; then the medians over the rounds, and the p99 of all
rounds' calls together (the p99 of 400 calls is their 4th slowest: from one round to the next it
ranges from about half the provider's p99 to all of it, and so does what hedging can take off).

    python benchmarks/hedge.py                   # 400 calls, limit 20, 16 callers, 3 rounds
    python benchmarks/hedge.py --calls 400 --rounds 5 --callers 20
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import anyio

from asynceval import OpenAIChatModel, Runtime, Settings
from asynceval.llm import track_usage
from asynceval.sim import SimConfig, SimProvider


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def one_run(args: argparse.Namespace, seed: int, hedge: str) -> dict[str, Any]:
    """N calls under LLM_HEDGE=`hedge`: their latencies and what the provider saw."""
    config = SimConfig(
        seed=seed,
        latency=args.median,
        latency_jitter=args.sigma,
        latency_distribution="lognormal",
    )
    settings = Settings(
        max_concurrent_llm_calls=args.limit,
        llm_hedge=hedge,
        llm_hedge_budget=args.budget,
        log_level="ERROR",
    )
    latencies: list[float] = []
    questions = iter(range(args.calls))
    async with Runtime(settings):
        model = OpenAIChatModel(sim_config=config)

        async def caller() -> None:
            for index in questions:  # shared: each caller takes the next question
                started = time.monotonic()
                await model.generate(f"Question {index}: what is {index} + {seed}?")
                latencies.append(time.monotonic() - started)

        with track_usage() as usage:
            started = time.monotonic()
            async with model, anyio.create_task_group() as tg:
                for _ in range(args.callers):
                    tg.start_soon(caller)
            wall = time.monotonic() - started
        sim = model.sim
        assert isinstance(sim, SimProvider)
        stats = sim.stats()
    return {
        "hedge": hedge,
        "p50": percentile(latencies, 0.50),
        "p95": percentile(latencies, 0.95),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies),
        "wall": wall,
        "requests": stats["requests"],
        "extra": stats["requests"] - args.calls,
        "hedges": usage.hedges,
        "latencies": latencies,
    }


def show(row: dict[str, Any]) -> str:
    ms = {k: row[k] * 1000 for k in ("p50", "p95", "p99", "max")}
    return (
        f"  LLM_HEDGE={row['hedge']:<4} p50 {ms['p50']:6.1f} ms  p95 {ms['p95']:6.1f} ms  "
        f"p99 {ms['p99']:7.1f} ms  max {ms['max']:7.1f} ms  wall {row['wall']:5.2f} s  "
        f"requests {row['requests']} (+{row['extra']}, hedges {row['hedges']})"
    )


async def main(args: argparse.Namespace) -> None:
    print(
        f"{args.calls} calls, lognormal latency (median {args.median * 1000:.0f} ms, sigma "
        f"{args.sigma}), MAX_CONCURRENT_LLM_CALLS={args.limit}, {args.callers} callers"
    )
    cuts, extras = [], []
    pooled: dict[str, list[float]] = {"off": [], "p95": []}
    for round_no in range(1, args.rounds + 1):
        seed = args.seed + round_no
        off = await one_run(args, seed, "off")
        on = await one_run(args, seed, "p95")
        cut = 1 - on["p99"] / off["p99"]
        extra = on["extra"] / args.calls
        cuts.append(cut)
        extras.append(extra)
        pooled["off"] += off["latencies"]
        pooled["p95"] += on["latencies"]
        print(f"round {round_no} (seed {seed}):")
        print(show(off))
        print(show(on))
        print(f"  p99 with p95 hedging: {cut:.1%} below off; extra requests {extra:.1%}")
    p99_off, p99_on = percentile(pooled["off"], 0.99), percentile(pooled["p95"], 0.99)
    print(
        f"median over {len(cuts)} round(s): p99 {statistics.median(cuts):.1%} below off, "
        f"extra requests {statistics.median(extras):.1%} (most {max(extras):.1%})"
    )
    print(
        f"all {len(pooled['off'])} calls of each: p99 off {p99_off * 1000:.0f} ms, "
        f"p95 {p99_on * 1000:.0f} ms: {1 - p99_on / p99_off:.1%} below off"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--median", type=float, default=0.05)
    parser.add_argument("--sigma", type=float, default=1.29)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=0.05, help="LLM_HEDGE_BUDGET")
    anyio.run(main, parser.parse_args())
