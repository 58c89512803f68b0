"""`DaskBackend`: a run's repetitions on a Dask distributed cluster, one LLM-call limit for all.

The caller keeps the queue, the results file, resume, callbacks, progress and the summary (the
engine's `Run`); repetitions run on the workers' event loops, sent in batches (`_batches`). At
most `capacity` (workers x MAX_CONCURRENT_TASKS) are outstanding, so memory on both sides stays
bounded by the concurrency. A repetition whose worker dies is re-run by Dask on another worker;
its report is recorded once, when its batch completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import os
import signal
import sys
import sysconfig
import threading
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import cloudpickle
import dask.config
from distributed import Client, LocalCluster, Semaphore

from ..engine.run_reports import RunReports
from ..errors import ConfigError
from ._budget import RunBudget
from ._grants import GrantPlugin
from ._grants import plugin_name as grants_name
from ._rate import RatePlugin, forget_run
from ._relay import CallerRelay
from ._session import DaskSession, scheduler_address
from ._worker import RunPlugin, plugin_name, quiet_dask_logs, restore_levels, topic

if TYPE_CHECKING:
    from ..config import Settings
    from ..engine.benchmark import Benchmark
    from ..limits import CostBudget


class DaskBackend:
    """Run repetitions on a Dask cluster: `await bench.run(tasks, backend=DaskBackend(...))`.

    `client_or_address`: a `distributed.Client` (sync or asynchronous), a scheduler address
    ("tcp://host:8786"), or None to start a `LocalCluster` of `n_workers` worker processes
    (default: the core count) for the run and close it after. `lease_timeout` (seconds) is how
    long a dead worker's LLM-call slots stay taken (Dask's lease timeout; its default when None).
    """

    def __init__(
        self,
        client_or_address: Client | str | None = None,
        *,
        n_workers: int | None = None,
        lease_timeout: float | None = None,
    ) -> None:
        if n_workers is not None and (
            isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1
        ):
            raise ValueError(f"n_workers must be an int >= 1, got {n_workers!r}")
        if n_workers is not None and client_or_address is not None:
            raise ValueError(
                "n_workers is for the local cluster DaskBackend starts; not with a client"
            )
        if lease_timeout is not None and not lease_timeout > 0:
            raise ValueError(f"lease_timeout must be > 0 seconds, got {lease_timeout!r}")
        if client_or_address is not None and not isinstance(client_or_address, str | Client):
            raise TypeError(
                "client_or_address must be a distributed.Client, a scheduler address or None, "
                f"got {type(client_or_address).__name__}"
            )
        self.target = client_or_address
        self.n_workers = n_workers
        self.lease_timeout = lease_timeout

    def check(self) -> None:
        """Raise ConfigError when the scheduler address is one Dask cannot use (an unknown
        scheme, no host or port, an in-process address); nothing is connected to. A run checks
        it before it connects; a command line can call it before it writes anything."""
        if isinstance(self.target, str):
            problem = address_problem(self.target)
            if problem is not None:
                raise ConfigError(problem)

    def __repr__(self) -> str:
        target = self.target if isinstance(self.target, str | None) else "Client"
        return f"DaskBackend({target!r}, n_workers={self.n_workers}, lease_timeout={self.lease_timeout})"

    def _config(self) -> dict[str, Any]:
        """The lease settings the run's semaphore is made under (workers get them too, so none
        keeps an earlier run's): `lease_timeout`, else Dask's configured value, sent explicitly."""
        if self.lease_timeout is None:
            key = "distributed.scheduler.locks.lease-timeout"
            return {key: dask.config.get(key)}
        timeout = self.lease_timeout
        return {
            "distributed.scheduler.locks.lease-timeout": f"{timeout}s",
            "distributed.scheduler.locks.lease-validation-interval": f"{max(timeout / 4, 0.05)}s",
        }

    @asynccontextmanager
    async def session(
        self,
        bench: Benchmark,
        settings: Settings,
        max_concurrent_tasks: int,
        run_key: str | None = None,
        budget: CostBudget | None = None,
    ) -> AsyncIterator[DaskSession]:
        # A run continued with --resume is the same run to the cluster: the same semaphore, so
        # repetitions a killed caller left running still count against the limit, and the same
        # plugin name, so registering it replaces (tears down) the one the killed caller left.
        digest = hashlib.sha1(run_key.encode()).hexdigest() if run_key else uuid.uuid4().hex
        run_id = f"asynceval-{digest[:12]}"
        sent = pickled_benchmark(bench)
        config = self._config()
        with dask.config.set(config):
            async with AsyncExitStack() as stack:
                client = await self._connect(stack, max_concurrent_tasks)
                nthreads: dict[str, int] = await client.nthreads()
                workers = len(nthreads)
                if workers == 0:
                    raise ConfigError(
                        f"the Dask cluster at {scheduler_address(client)} has no workers"
                    )
                # Registered here first, so the run's lease timeout is the semaphore's. Its name
                # holds the limit: a resumed run with another limit gets a semaphore of its own.
                limit = settings.max_concurrent_llm_calls
                semaphore_name = f"{run_id}-{limit}"
                semaphore = await Semaphore(
                    max_leases=limit,
                    name=semaphore_name,
                    scheduler_rpc=client.scheduler,
                    loop=client.loop,
                )
                stack.push_async_callback(_close_semaphore, semaphore)
                # A worker runs at most nthreads Dask tasks (batches) at once, async ones too:
                # batches are big enough that its threads hold MAX_CONCURRENT_TASKS repetitions.
                tasks = max_concurrent_tasks
                threads = max(1, min(min(nthreads.values()), tasks))
                size = min(32, max(1, -(-tasks // threads), tasks // 4))
                ledger = await _scheduler_plugins(client, stack, run_id, settings, budget)
                session = DaskSession(client, run_id, workers, workers * tasks, size, ledger)
                client.subscribe_topic(topic(run_id), session.on_event)
                stack.callback(client.unsubscribe_topic, topic(run_id))
                relay = CallerRelay.opened(client, run_id, settings, semaphore)
                plugin = RunPlugin(
                    run_id,
                    sent,
                    settings,
                    config,
                    max_concurrent_tasks,
                    semaphore_name,
                    ledger.for_workers if ledger is not None else None,
                )
                await client.register_plugin(plugin, name=plugin_name(run_id))
                # Before the semaphore closes: the workers give back their free leases.
                stack.push_async_callback(_unregister_workers, client, plugin_name(run_id))
                stack.push_async_callback(relay.aclose)  # after the workers' repetitions stop
                stack.push_async_callback(session.finish)
                yield session

    async def _connect(self, stack: AsyncExitStack, tasks: int) -> Client:
        """An asynchronous client on this loop: the caller's own if it is one, else ours."""
        target = self.target
        if target is None:
            n = self.n_workers or _cores()
            hushed: dict[str, int] = {}
            stack.callback(restore_levels, hushed)  # last, once the cluster is closed
            with _sigint_ignored():  # the worker processes started now never get SIGINT
                cluster = await _enter_shielded(
                    stack,
                    LocalCluster(
                        n_workers=n,
                        threads_per_worker=tasks,  # a worker runs at most nthreads tasks at once
                        processes=True,
                        dashboard_address=":0",  # no fixed port: several clusters may run
                        asynchronous=True,
                    ),
                )
            client: Client = await _enter_shielded(stack, Client(cluster, asynchronous=True))
            stack.push_async_callback(_hush, client, hushed)  # first, before the cluster closes
            await client.wait_for_workers(n)  # type: ignore[func-returns-value,misc]
            return client
        if isinstance(target, Client):
            if (
                target.asynchronous
                and getattr(target.loop, "asyncio_loop", None) is _running_loop()
            ):
                return target
            security, target = target.security, scheduler_address(target)  # TLS settings included
        else:
            security = None
            self.check()
        try:
            client = await _enter_shielded(
                stack, Client(target, asynchronous=True, timeout=10, security=security)
            )
            return client
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {target}: {exc}") from None


async def _scheduler_plugins(
    client: Client,
    stack: AsyncExitStack,
    run_id: str,
    settings: Settings,
    budget: CostBudget | None,
) -> RunBudget | None:
    """The run's state on the scheduler, before the workers' plugin: where leases are granted,
    its 429 pauses (a worker's first lease asks for them), its rate windows if it has
    LLM_REQUESTS_PER_MINUTE or LLM_TOKENS_PER_MINUTE, and its cost budget's ledger if it has
    a budget (returned: the caller's side of it); `stack` takes them down."""
    ledger = RunBudget(client, run_id, budget) if budget is not None else None
    if ledger is not None:
        await ledger.open(stack)
    await client.register_plugin(GrantPlugin(run_id), name=grants_name(run_id))
    stack.push_async_callback(_unregister, client, grants_name(run_id))
    requests, tokens = settings.llm_requests_per_minute, settings.llm_tokens_per_minute
    if requests is not None or tokens is not None:
        rate_name = f"{run_id}-rate"
        await client.register_plugin(RatePlugin(run_id, requests, tokens), name=rate_name)
        stack.push_async_callback(_unregister, client, rate_name, run_id)
    return ledger


async def _enter_shielded(stack: AsyncExitStack, manager: Any) -> Any:
    """`stack.enter_async_context(manager)`, its exit shielded from cancellation (bounded): a
    run cancelled (Ctrl-C, a caller's cancel scope) still closes its client and its local
    cluster; an unshielded exit was cancelled at its first await, leaving the client to close
    itself at garbage collection, on a loop closed by then."""
    entered = await manager.__aenter__()

    async def leave(*exc_info: Any) -> bool:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
            return bool(await manager.__aexit__(*exc_info))
        return False

    stack.push_async_exit(leave)
    return entered


CLOSE_TIMEOUT_S = 30.0
"""The longest a run's end waits for its Dask client or local cluster to close."""


async def _unregister_workers(client: Client, name: str) -> None:
    """The run's worker plugin goes: each worker tears its run state down."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(10), contextlib.suppress(Exception):
        await client.unregister_worker_plugin(name)


async def _unregister(client: Client, name: str, windows_of: str | None = None) -> None:
    """A run's scheduler plugin goes, and the windows of run `windows_of` if given; quietly,
    not to hide the run's outcome (the scheduler may be gone)."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(5):
        with contextlib.suppress(Exception):
            await client.unregister_scheduler_plugin(name)
        if windows_of is not None:
            with contextlib.suppress(Exception):  # even if the plugin was already gone
                await client.run_on_scheduler(forget_run, windows_of)


async def _close_semaphore(semaphore: Semaphore) -> None:
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(5),
        contextlib.suppress(Exception),
        warnings.catch_warnings(),  # leases a stopped run's workers held: expected then
    ):
        warnings.filterwarnings("ignore", "Closing semaphore", RuntimeWarning)
        await semaphore.close()


async def _hush(client: Client, levels: dict[str, int]) -> None:
    """As the local cluster a run started closes (at its end or on Ctrl-C): Dask's loggers
    quiet here and on its workers, which would log each other's going as errors with
    tracebacks; the caller's levels come back once the cluster is closed (`restore_levels`)."""
    levels.update(quiet_dask_logs())
    with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(Exception):
        await client.run(quiet_dask_logs, on_error="ignore")


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored meanwhile, so by the worker processes started now, for their whole life (an
    ignored signal stays ignored across exec, and Python leaves it so): Ctrl-C reaches the
    terminal's whole process group, and the run, not each worker, answers it, in one line. A
    Ctrl-C while the local cluster starts (a second or two) is not seen; one after it is."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; workers then hear Ctrl-C themselves
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def address_problem(address: str) -> str | None:
    """Why Dask cannot use `address` as a scheduler's (one line), or None if it can."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address

    hint = "give a scheduler address such as tcp://host:8786"
    try:
        scheme, location = parse_address(address, strict=False)
        backend = registry.get_backend(scheme)
        if scheme == "inproc":
            return f"{address!r} is an in-process Dask address, of no use to a run; {hint}"
        backend.get_address_host_port(location)
    except Exception as exc:  # ValueError mostly; whatever a comm backend raises
        return f"{address!r} is not a Dask scheduler address Dask can use ({exc}); {hint}"
    return None


def pickled_benchmark(bench: Benchmark) -> bytes:
    """The Benchmark as cloudpickle bytes; a class from a script (a module workers cannot import)
    travels by value. Raises ConfigError naming the attribute that cannot be pickled."""
    for cls in type(bench).__mro__:
        module = sys.modules.get(cls.__module__)
        if module is not None and _by_value(module):
            cloudpickle.register_pickle_by_value(module)
    # What belongs to this process stays: the workers use their own runtime and limiter, and
    # callbacks and reports are the caller's.
    travelling = copy.copy(bench)
    travelling.runtime = None
    travelling.controller = None
    travelling.callbacks = []
    travelling.reports = RunReports.empty()
    travelling.budget = None  # the caller's: the workers reserve from the run's ledger
    try:
        sent: bytes = cloudpickle.dumps(travelling)
        return sent
    except Exception as exc:
        culprit = _unpicklable_attribute(travelling)
        where = f" (its attribute {culprit!r})" if culprit else ""
        raise ConfigError(
            f"the Benchmark {type(bench).__qualname__} cannot be sent to the Dask workers"
            f"{where}: {type(exc).__name__}: {exc}; build such things in setup_* hooks, "
            "which run on the workers"
        ) from None


def _unpicklable_attribute(bench: Benchmark) -> str | None:
    for name, value in vars(bench).items():
        try:
            cloudpickle.dumps(value)
        except Exception:
            return name
    return None


def _by_value(module: ModuleType) -> bool:
    """Whether a benchmark's module travels with it: the user's own code (a script, a project
    directory), which the workers may not be able to import; not installed packages."""
    name, file = module.__name__, getattr(module, "__file__", None)
    if name == "__main__" or file is None or name.split(".")[0] == "asynceval":
        return False  # __main__ is by value already; builtins and asynceval are on the workers
    parts = Path(file).resolve().parts
    return "site-packages" not in parts and "dist-packages" not in parts and not _stdlib(file)


def _stdlib(file: str) -> bool:
    stdlib = sysconfig.get_paths()["stdlib"]
    return Path(file).resolve().is_relative_to(Path(stdlib).resolve())


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()
