"""A provider's RPM cap announced in its rate-limit headers: the 429s it costs with and without
pacing from those headers, in the same run.

The simulated provider (`SimConfig(rpm=..., rate_window=...)`, loopback HTTP, uvicorn in a
thread) admits `--rpm` requests per `--rate-window` seconds and announces the cap in OpenAI's
`x-ratelimit-*` headers on every answer (limit per minute, what the window has left, when it is
whole again); over the cap it answers 429 with `retry-after-ms`. `--calls` calls, `--limit` at
once, no LLM_REQUESTS_PER_MINUTE set, go through `OpenAIChatModel` twice: once as the provider
says it (with pacing: the funnel keeps the announced limit and budget), once with every
`x-ratelimit-*` header taken out of its answers (without: the funnel only sees the 429s, each
with its Retry-After). Figures from the provider's own counters.

Ideal wall: the first `--rpm` calls at once, then `--rpm` per window:
(ceil(calls / rpm) - 1) x window + latency.

    .venv/bin/python benchmarks/header_pacing.py                   # 300 per 5 s (60/s), 1200 calls
    .venv/bin/python benchmarks/header_pacing.py --rpm 100 --rate-window 2 --calls 400
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import anyio
from _loopback import serve

from asynceval import LLMCallFailed, OpenAIChatModel, Runtime, Settings, configure_logging
from asynceval.sim import SimConfig, SimProvider


class WithoutRateHeaders:
    """The provider's ASGI app, its answers stripped of every `x-ratelimit-*` header."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message["headers"] if not k.startswith(b"x-ratelimit-")]
                message = {**message, "headers": kept}
            await send(message)

        await self.app(scope, receive, sending)


async def one_run(args: argparse.Namespace, headers: bool) -> dict[str, Any]:
    sim = SimProvider(
        SimConfig(
            latency=args.latency,
            latency_distribution="fixed",
            rpm=args.rpm,
            rate_window=args.rate_window,
        )
    )
    port, server = serve(sim if headers else WithoutRateHeaders(sim))
    failed = 0
    settings = Settings(max_concurrent_llm_calls=args.limit)
    try:
        async with (
            Runtime(settings),
            OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k") as model,
        ):

            async def one(index: int) -> None:
                nonlocal failed
                try:
                    await model.generate(f"question {index}")
                except LLMCallFailed:
                    failed += 1

            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for index in range(args.calls):
                    tg.start_soon(one, index)
            wall = time.perf_counter() - started
    finally:
        server.should_exit = True
    stats = sim.stats()
    return {"wall": wall, "failed": failed, "429s": stats["statuses"].get("429", 0)}


async def main(args: argparse.Namespace) -> None:
    configure_logging(Settings(log_level="ERROR"))
    allowed = args.rpm / args.rate_window
    ideal = (math.ceil(args.calls / args.rpm) - 1) * args.rate_window + args.latency
    print(
        f"{args.calls} calls, {args.limit} at once, {args.latency} s each; provider cap "
        f"{args.rpm} per {args.rate_window} s ({allowed:.0f}/s), announced in x-ratelimit-* "
        f"headers; ideal wall {ideal:.2f} s"
    )
    for headers in (True, False):
        row = await one_run(args, headers)
        name = "with header pacing   " if headers else "without (no headers) "
        print(
            f"  {name}: 429s {row['429s']:>5}  failed {row['failed']:>4}  wall {row['wall']:6.2f} s"
            f"  {args.calls / row['wall']:6.1f} calls/s  ideal/wall {ideal / row['wall']:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1200)
    parser.add_argument("--limit", type=int, default=50, help="MAX_CONCURRENT_LLM_CALLS")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per call")
    parser.add_argument("--rpm", type=int, default=300, help="the provider's cap per window")
    parser.add_argument("--rate-window", type=float, default=5.0, help="the cap's window (s)")
    anyio.run(main, parser.parse_args())
