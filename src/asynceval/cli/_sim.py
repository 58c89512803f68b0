"""`asynceval sim serve`: the simulated provider on a loopback socket."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..sim import SimConfig, serve


def _fault(text: str) -> tuple[int, float]:
    status, sep, rate = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return int(status), float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected STATUS=RATE such as 503=0.1, got {text!r}"
        ) from None


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {text!r}")
    return port


def add_parser(commands: Any) -> None:
    """Add `sim serve` to the `asynceval` subcommands."""
    sim = commands.add_parser("sim", help="the simulated LLM provider")
    sim_commands = sim.add_subparsers(dest="sim_command", required=True, metavar="SUBCOMMAND")
    serve_cmd = sim_commands.add_parser(
        "serve",
        help="serve the simulated provider on a socket (OpenAI /v1/chat/completions, "
        "/v1/responses, /v1/files, /v1/batches; Anthropic /v1/messages, /v1/messages/batches; "
        "GET /stats)",
        description="Serve the simulated provider. Point a client at http://HOST:PORT/v1.",
    )
    _add_options(serve_cmd)
    serve_cmd.set_defaults(handler=sim_serve)


def _add_options(serve_cmd: argparse.ArgumentParser) -> None:
    """`sim serve`'s options: where to listen, and every SimConfig knob."""
    serve_cmd.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve_cmd.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
    serve_cmd.add_argument("--seed", type=int, default=0, help="seed for every random draw")
    _add_latency(serve_cmd)
    _add_caps(serve_cmd)
    _add_faults(serve_cmd)
    _add_batches(serve_cmd)
    serve_cmd.add_argument(
        "--attempt-memory",
        type=int,
        default=65_536,
        metavar="N",
        help="remember attempt counts of the last N distinct requests (default 65536)",
    )
    serve_cmd.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="uvicorn's log level",
    )


def _add_latency(serve_cmd: argparse.ArgumentParser) -> None:
    serve_cmd.add_argument("--latency", type=float, default=0.05, help="mean seconds per request")
    serve_cmd.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        help="uniform jitter in seconds; for lognormal, its sigma (1.29: p99 = 20 x median)",
    )
    serve_cmd.add_argument(
        "--distribution",
        choices=["fixed", "uniform", "exponential", "lognormal"],
        default="uniform",
        help="latency shape (lognormal: --latency is the median)",
    )
    serve_cmd.add_argument(
        "--stream-chunk-delay", type=float, default=0.0, metavar="SECONDS",
        help="seconds between the events of a streamed answer (default 0)",
    )  # fmt: skip


def _add_caps(serve_cmd: argparse.ArgumentParser) -> None:
    serve_cmd.add_argument(
        "--max-concurrency", type=int, default=None, help="server-side cap; above it: 429"
    )
    serve_cmd.add_argument(
        "--rpm", type=int, default=None, help="requests per rate window (a minute); over: 429"
    )
    serve_cmd.add_argument(
        "--tpm", type=int, default=None, help="tokens per rate window (a minute); over: 429"
    )
    serve_cmd.add_argument(
        "--rate-window",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="the window of --rpm, --tpm and of the window_max_* stats (default 60)",
    )
    serve_cmd.add_argument(
        "--retry-after", type=float, default=1.0, help="Retry-After sent with 429/503 (seconds)"
    )


def _add_faults(serve_cmd: argparse.ArgumentParser) -> None:
    serve_cmd.add_argument(
        "--fail-first", type=int, default=0, help="fail the first N attempts of each request"
    )
    serve_cmd.add_argument("--fail-first-status", type=int, default=429)
    serve_cmd.add_argument(
        "--fault",
        type=_fault,
        action="append",
        default=[],
        metavar="STATUS=RATE",
        help="answer STATUS with probability RATE per attempt (repeatable), e.g. 503=0.1",
    )
    serve_cmd.add_argument("--hang-rate", type=float, default=0.0, help="never answer")
    serve_cmd.add_argument("--malformed-rate", type=float, default=0.0, help="200, body not JSON")
    serve_cmd.add_argument("--truncated-rate", type=float, default=0.0, help="200, JSON cut short")


def _add_batches(serve_cmd: argparse.ArgumentParser) -> None:
    """The batch APIs' delay and faults (/v1/batches, /v1/messages/batches)."""
    serve_cmd.add_argument(
        "--batch-delay", type=float, default=0.0, metavar="SECONDS",
        help="a batch ends this long after it was created (default 0)",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--batch-fail-first", type=int, default=0, metavar="N",
        help="the first N batches created fail",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--batch-fail-rate", type=float, default=0.0, metavar="RATE",
        help="each batch fails with this probability",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--batch-error-rate", type=float, default=0.0, metavar="RATE",
        help="each batch line is answered a retryable 500 with this probability",
    )  # fmt: skip
    serve_cmd.add_argument(
        "--batch-expire-rate", type=float, default=0.0, metavar="RATE",
        help="each batch line expires with this probability",
    )  # fmt: skip


def sim_serve(args: argparse.Namespace) -> int:
    try:
        config = SimConfig(
            seed=args.seed,
            latency=args.latency,
            latency_jitter=args.jitter,
            latency_distribution=args.distribution,
            max_concurrency=args.max_concurrency,
            rpm=args.rpm,
            tpm=args.tpm,
            rate_window=args.rate_window,
            retry_after=args.retry_after,
            fail_first=args.fail_first,
            fail_first_status=args.fail_first_status,
            fault_rates=dict(args.fault),
            hang_rate=args.hang_rate,
            malformed_rate=args.malformed_rate,
            truncated_rate=args.truncated_rate,
            attempt_memory=args.attempt_memory,
            stream_chunk_delay=args.stream_chunk_delay,
            batch_delay=args.batch_delay,
            batch_fail_first=args.batch_fail_first,
            batch_fail_rate=args.batch_fail_rate,
            batch_error_rate=args.batch_error_rate,
            batch_expire_rate=args.batch_expire_rate,
        )
    except ValueError as exc:
        print(f"asynceval sim serve: {exc}", file=sys.stderr)
        return 2
    print(f"simulated provider on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    serve(config, host=args.host, port=args.port, log_level=args.log_level)
    return 0
