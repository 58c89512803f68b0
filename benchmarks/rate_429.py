"""One second of rate-limit 429s in a run of 50 concurrent 0.5 s calls: what it costs.

A provider of this script's own (loopback HTTP, uvicorn in a thread) answers every call after
0.5 s, except for one second (from `--refuse-at` on) in which it answers every request at once
with 429, `x-ratelimit-remaining-requests: 0` and `retry-after-ms: 1000`: a rate refusal. 50
workers call it in a loop through `OpenAIChatModel` at MAX_CONCURRENT_LLM_CALLS=50 for
`--seconds`, and once more against the same provider without the 429s (the control). Measured
from the provider's own log, in round trips of 0.5 s:

- capacity lost: the calls the control run answered minus the calls answered (the 1 s pause
  itself costs about two rounds' worth);
- time to full throughput: from the end of the 429 second to the start of the first round trip
  from which the calls lost against the control stop growing (within 1.5 rounds' worth);
- the 429s sent, calls failed, and the endpoint's lowest adaptive limit (`limit_changed`).

    .venv/bin/python benchmarks/rate_429.py                       # this tree
    PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/rate_429.py   # a worktree of another
"""

from __future__ import annotations

import argparse
import io
import json
import time
from typing import Any

import anyio
from _loopback import serve

from asynceval import LLMCallFailed, OpenAIChatModel, Runtime, Settings, configure_logging

_COMPLETION = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9},
    }
).encode()
_REFUSAL = json.dumps({"error": {"message": "Rate limit reached for requests"}}).encode()


class Provider:
    """Answers after `latency`, or 429 at once in [refuse_from, refuse_until) (monotonic)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.refuse_from = self.refuse_until = float("inf")
        self.answered: list[float] = []  # when each 200 was sent
        self.refused = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        now = time.monotonic()
        if self.refuse_from <= now < self.refuse_until:
            self.refused += 1
            headers = [
                (b"content-type", b"application/json"),
                (b"x-ratelimit-remaining-requests", b"0"),
                (b"retry-after-ms", b"1000"),
            ]
            await send({"type": "http.response.start", "status": 429, "headers": headers})
            await send({"type": "http.response.body", "body": _REFUSAL})
            return
        await anyio.sleep(self.latency)
        self.answered.append(time.monotonic())
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": _COMPLETION})


async def run(
    args: argparse.Namespace, provider: Provider, base_url: str, refuse: bool
) -> dict[str, Any]:
    events = io.StringIO()
    settings = Settings(max_concurrent_llm_calls=args.limit)
    configure_logging(Settings(log_level="INFO"), stream=events)
    failed = 0
    async with Runtime(settings), OpenAIChatModel("m", base_url=base_url, api_key="k") as model:
        started = time.monotonic()
        if refuse:
            provider.refuse_from = started + args.refuse_at
            provider.refuse_until = provider.refuse_from + 1.0
        deadline = started + args.seconds

        async def worker(index: int) -> None:
            nonlocal failed
            call = 0
            while time.monotonic() < deadline:
                call += 1
                try:
                    await model.generate(f"worker {index} call {call}")
                except LLMCallFailed:
                    failed += 1

        async with anyio.create_task_group() as tg:
            for index in range(args.limit):
                tg.start_soon(worker, index)
    lines = [json.loads(line) for line in events.getvalue().splitlines() if line.strip()]
    limits = [e["limit"] for e in lines if e["event"] == "limit_changed"]
    return {"started": started, "failed": failed, "limits": limits}


def per_round(args: argparse.Namespace, provider: Provider, started: float) -> list[int]:
    """The calls the provider answered in each round trip of `latency` seconds of the run."""
    rounds = int(args.seconds / args.latency)
    counts = [0] * rounds
    for at in provider.answered:
        index = int((at - started) / args.latency)
        if 0 <= index < rounds:
            counts[index] += 1
    return counts


def back_after(
    args: argparse.Namespace, counts: list[int], control: list[int], steady: float
) -> float:
    """Seconds from the end of the 429 second to the first round from which the calls lost
    against the control run stop growing: from there on, never more than 1.5 rounds' worth
    more (workers run in step, so a round's answers may straddle a boundary in either run)."""
    end = int((args.refuse_at + 1.0) / args.latency)  # the first round after the 429 second
    lost = [0]
    for ours, theirs in zip(counts, control, strict=True):
        lost.append(lost[-1] + theirs - ours)  # lost[i]: calls lost before round i
    back = next(
        (i for i in range(end, len(counts)) if max(lost[i:]) - lost[i] <= 1.5 * steady),
        len(counts),
    )
    return (back - end) * args.latency


async def measured(args: argparse.Namespace, refuse: bool) -> tuple[list[int], dict[str, Any]]:
    provider = Provider(args.latency)
    port, server = serve(provider)
    try:
        result = await run(args, provider, f"http://127.0.0.1:{port}/v1", refuse)
    finally:
        server.should_exit = True
    result["refused"] = provider.refused
    return per_round(args, provider, result["started"]), result


async def main(args: argparse.Namespace) -> None:
    control, _ = await measured(args, refuse=False)
    counts, result = await measured(args, refuse=True)
    steady = sum(control[2:]) / (len(control) - 2)  # calls per round, the first second left out
    if args.verbose:
        print("  control, answered per round:", control)
        print("  429s, answered per round:   ", counts)
    print(
        f"{args.limit} concurrent calls of {args.latency} s for {args.seconds} s; 429s "
        f"(remaining-requests 0, retry-after-ms 1000) from {args.refuse_at} s to "
        f"{args.refuse_at + 1} s; a control run without them"
    )
    print(f"  answered: {sum(counts)} (control {sum(control)}, {steady:.1f} per round trip)")
    print(f"  capacity lost: {sum(control) - sum(counts)} calls")
    print(
        "  time to full throughput after the 429s end: "
        f"{back_after(args, counts, control, steady):.1f} s"
    )
    print(
        f"  429s sent: {result['refused']}, calls failed: {result['failed']}, "
        f"limit_changed: {len(result['limits'])} (lowest {min(result['limits'], default='-')})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=50, help="MAX_CONCURRENT_LLM_CALLS, workers")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per answered call")
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the run")
    parser.add_argument("--refuse-at", type=float, default=4.0, help="when the 429 second starts")
    parser.add_argument("--verbose", action="store_true", help="print the calls of each round")
    anyio.run(main, parser.parse_args())
