"""What a repetition's code does to the rest of the process, watched from outside it.

- Calls sent: every attempt of an LLM call that takes a slot is noted in the repetition's
  `TaskContext` (an observer of the `acquired` event, in the caller's context), so that a call
  cut short (a timeout of the repetition, a task cancelled at its end) still counts in
  `usage.llm_calls`: the provider received it.
- Tasks left running (asyncio only): while runs go on a loop, its task factory notes every task
  started inside a repetition; those still running when the repetition ends are cancelled, their
  calls counted, and a `tasks_left_running` WARNING names the agent.
- A blocked event loop: a watch thread per loop pings it every few tens of milliseconds; when
  an answer is later than LOOP_BLOCK_WARN_S, it looks at the loop thread's frames to see whose
  code holds it (the repetition, the agent), and a `loop_blocked` WARNING names that agent and
  how long. LLM calls that timed out during such a block are put down to it, not to the
  provider (see `recent_block`).

The watch starts with the first repetition of a run on a loop (`watch_loop`) and stops once
every run that used it has ended; its cost on the loop is one ping answered per tick. One watch
per loop, shared by the runs on it: the first run's LOOP_BLOCK_WARN_S is the threshold.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from types import CodeType, FrameType, FunctionType, MethodType
from typing import Any

import anyio

from .. import events
from ..funnel import call_of
from .context import TaskContext, current_context

# ---------------------------------------------------------------------------------------------
# Calls sent


def _observe(event: str, fields: Mapping[str, Any]) -> None:
    if event == "acquired":
        context = current_context()
        if context is not None:
            sent = fields.get("call_id")
            # A hedge (its own id, named after its call's) is the same call, not another.
            context.sent_calls.add(call_of(sent) if isinstance(sent, str) else sent)


_observing = False
_observing_lock = threading.Lock()


def observe_calls() -> None:
    """Note each call's first slot in its repetition's context from now on (once a process)."""
    global _observing
    with _observing_lock:
        if not _observing:
            events.add_observer(_observe, only=("acquired",))
            _observing = True


def live_calls(usage: Any) -> int:
    """Calls a usage counter counts that went to the provider (not answered from a store)."""
    stored = int(getattr(usage, "cache_hits", 0)) + int(getattr(usage, "journal_hits", 0))
    return int(usage.llm_calls) - stored


def count_calls_cut(context: TaskContext, usage: Any, live_before: int) -> int:
    """Add to `usage.llm_calls` the calls this attempt sent that never finished (cancelled
    in flight, or in their retry's back-off); returns how many."""
    cut = len(context.sent_calls) - (live_calls(usage) - live_before)
    if cut > 0:
        usage.llm_calls += cut
        return cut
    return 0


# ---------------------------------------------------------------------------------------------
# Tasks left running


_CANCEL_WAIT_S = 5.0  # how long the end of a repetition waits for its left tasks to stop


def _task_factory(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
) -> asyncio.Future[Any]:
    """The loop's task factory while runs go on it: the previous one's task (or a plain Task),
    noted in the repetition it was started in."""
    watch = _watches.get(loop)
    previous = watch.previous_factory if watch is not None else None
    factory = previous if previous is not None else _plain_task
    task = factory(loop, coro, **kwargs)
    context = current_context()
    if context is not None and _started_by_the_repetitions_code():
        context.started_tasks.append(task)
    return task


# Who starts a task decides whose it is: tasks the libraries under a repetition start for their
# own ends (a Dask semaphore's lease, a connection pool's reader, asynceval's own) live on after
# it by design; cancelling them broke a Dask run after ~120 repetitions.
_PLUMBING = ("asyncio.", "anyio.", "contextlib", "functools", "sniffio", "concurrent.")
_NOT_THE_AGENTS = (
    "asynceval.",
    "distributed.",
    "tornado.",
    "aiohttp.",
    "aiohappyeyeballs.",
    "httpx.",
    "httpx_aiohttp.",
    "httpcore.",
    "h11.",
    "dask.",
)


def _started_by_the_repetitions_code() -> bool:
    """Whether the code that asked for the task being made (the first caller above asyncio's
    and anyio's own frames) is the repetition's (the agent's, a hook's, a library it calls
    itself) rather than the engine's or its transports'."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module + ".").startswith(_PLUMBING):
            return not (module + ".").startswith(_NOT_THE_AGENTS)
        frame = frame.f_back
    return False


def _plain_task(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
) -> asyncio.Future[Any]:
    return asyncio.Task(coro, loop=loop, **kwargs)


def cancel_tasks_left(context: TaskContext) -> list[asyncio.Future[Any]]:
    """Cancel the tasks started in this attempt that are still running; returns them."""
    left = [task for task in context.started_tasks if not task.done()]
    context.started_tasks.clear()
    for task in left:
        task.cancel()
    return left


async def end_tasks_left(context: TaskContext, agents: Mapping[str, Any] | None) -> None:
    """At the end of an attempt: cancel the tasks its code started and left running, wait
    (shielded, a few seconds at most) for them to stop, so that their calls are counted, and
    write `tasks_left_running` naming the agent."""
    left = cancel_tasks_left(context)
    if not left:
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT_S):
        await asyncio.wait(left)
    events.tasks_left_running(
        agent=_agent_of_tasks(left, agents or {}),
        count=len(left),
        tasks=[_describe(task) for task in left],
    )


def _describe(task: asyncio.Future[Any]) -> str:
    name = task.get_name() if isinstance(task, asyncio.Task) else repr(task)
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    qualname = getattr(coro, "__qualname__", None)
    return f"{name} ({qualname})" if qualname else name


def _agent_of_tasks(tasks: Iterable[asyncio.Future[Any]], agents: Mapping[str, Any]) -> str | None:
    """The agent whose code the tasks run: a method of it, or a function defined inside it;
    the only agent if there is one; else every agent's name."""
    if len(agents) == 1:
        return next(iter(agents))
    codes = _agent_codes(agents)
    for task in tasks:
        coro = task.get_coro() if isinstance(task, asyncio.Task) else None
        frame = getattr(coro, "cr_frame", None)
        code = getattr(coro, "cr_code", None)
        if isinstance(code, CodeType) and code in codes:
            return codes[code]
        qualname = str(getattr(coro, "__qualname__", ""))
        for name, agent in agents.items():
            agent_qualname = getattr(agent, "__qualname__", None)
            if agent_qualname and qualname.startswith(f"{agent_qualname}.<locals>."):
                return name
        owner = frame.f_locals.get("self") if isinstance(frame, FrameType) else None
        for name, agent in agents.items():
            if owner is not None and owner is agent:
                return name
    return ", ".join(agents) if agents else None


def _agent_codes(agents: Mapping[str, Any]) -> dict[CodeType, str]:
    """The code objects of each agent: its function, or its class's methods."""
    codes: dict[CodeType, str] = {}
    for name, agent in agents.items():
        target = agent.__func__ if isinstance(agent, MethodType) else agent
        if isinstance(target, FunctionType):
            codes.setdefault(target.__code__, name)
            continue
        for klass in type(agent).__mro__[:-1]:  # not object
            for member in vars(klass).values():
                function = getattr(member, "__func__", member)
                if isinstance(function, FunctionType):
                    codes.setdefault(function.__code__, name)
    return codes


# ---------------------------------------------------------------------------------------------
# A blocked event loop


@dataclass(frozen=True)
class Block:
    """One time the event loop did not run for `blocked_s`, ended at `ended` (monotonic),
    while `agent`'s code (in repetition `task_id`/`repeat_idx`) held it."""

    agent: str | None
    blocked_s: float
    ended: float
    task_id: str | None
    repeat_idx: int | None


@dataclass
class _Culprit:
    agent: str | None
    task_id: str | None
    repeat_idx: int | None
    events_context: contextvars.Context | None


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../asynceval
_HOOKS = ("Repetitions._hooks", os.path.join(_PACKAGE, "engine", "repetition.py"))


class _LoopWatch:
    """The watch thread of one event loop (see the module's docstring)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, threshold_s: float, run_over: threading.Event
    ) -> None:
        self.loop = loop
        self.threshold_s = threshold_s
        self.tick_s = min(0.05, threshold_s / 10)
        self.loop_thread = threading.get_ident()
        # Each run's "it has ended". The first run is in it before the thread starts: with
        # none, the thread would take the watch for finished and wait for the loop to say so,
        # missing a block by the very first repetition's code (an agent whose first line
        # sleeps or makes a sync call).
        self.runs: list[threading.Event] = [run_over]
        previous = loop.get_task_factory()
        self.previous_factory: Callable[..., Any] | None = (
            None if previous is _task_factory else previous
        )
        self.blocks: deque[Block] = deque(maxlen=32)
        self._answered = threading.Event()
        self._answered_at = 0.0
        self._verdict = threading.Event()
        self._pending: _Culprit | None = None  # the culprit of a block going on
        self._pending_lock = threading.Lock()
        self._stopped = False
        loop.set_task_factory(_task_factory)  # type: ignore[arg-type]
        self._thread = threading.Thread(
            target=self._watch, name="asynceval-loop-watch", daemon=True
        )
        self._thread.start()

    def _answer(self, sent: float) -> None:
        """On the loop: the ping's answer. After a block, the block is reported here, at once
        on the loop's return (before the calls it made late see their timeouts)."""
        now = self._answered_at = time.monotonic()
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is not None and now - sent > self.threshold_s:
            self._report(pending, now - sent)
        self._answered.set()

    def _watch(self) -> None:
        try:
            while not self._stopped:
                if all(run.is_set() for run in self.runs):
                    self._verdict.clear()
                    if not self._call_soon(self._finish):
                        break
                    while not self._verdict.wait(self.tick_s):
                        if self.loop.is_closed():
                            return
                    continue
                self._ping()
                time.sleep(self.tick_s)
        finally:
            self._forget()

    def _call_soon(self, callback: Callable[..., Any], *args: Any) -> bool:
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _ping(self) -> None:
        self._answered.clear()
        sent = time.monotonic()
        if not self._call_soon(self._answer, sent):
            self._stopped = True
            return
        if self._answered.wait(self.threshold_s):
            return
        culprit = self._culprit()
        with self._pending_lock:
            late = self._answered.is_set()  # the loop came back while the frames were read
            if not late:
                self._pending = culprit
        while not self._answered.wait(self.tick_s):
            if self.loop.is_closed():
                self._stopped = True
                return
        blocked = self._answered_at - sent
        if late and culprit is not None and blocked > self.threshold_s:
            self._call_soon(self._report, culprit, blocked)

    def _report(self, culprit: _Culprit, blocked_s: float) -> None:
        """On the loop: keep the block and write its WARNING in the repetition's context."""
        block = Block(
            culprit.agent, blocked_s, time.monotonic(), culprit.task_id, culprit.repeat_idx
        )
        self.blocks.append(block)
        say = functools.partial(
            events.loop_blocked,
            agent=culprit.agent,
            blocked_s=blocked_s,
            threshold_s=self.threshold_s,
        )
        if culprit.events_context is not None:
            culprit.events_context.run(say)
        else:
            say()

    def _finish(self) -> None:
        """On the loop: stop if every run that used the watch has ended (a run that started
        since keeps it going), putting the previous task factory back."""
        with _watches_lock:
            if all(run.is_set() for run in self.runs):
                self._stopped = True
                if _watches.get(self.loop) is self:
                    del _watches[self.loop]
                if self.loop.get_task_factory() is _task_factory:
                    self.loop.set_task_factory(self.previous_factory)
        self._verdict.set()

    def _forget(self) -> None:
        with _watches_lock:
            if _watches.get(self.loop) is self and self.loop.is_closed():
                del _watches[self.loop]

    def _culprit(self) -> _Culprit | None:
        """Whose code the loop thread is running now: the repetition and its agent, or a
        function of the application's outside any repetition; None inside asynceval itself."""
        frame = sys._current_frames().get(self.loop_thread)
        stack: list[FrameType] = []
        while frame is not None:
            stack.append(frame)
            frame = frame.f_back
        for index, candidate in enumerate(stack):
            code = candidate.f_code
            if (code.co_qualname, code.co_filename) == _HOOKS:
                return _in_repetition(candidate, stack[:index])
        for candidate in stack:  # innermost first
            if not _is_library(candidate.f_code.co_filename):
                return _Culprit(candidate.f_code.co_qualname, None, None, None)
        return None


def _in_repetition(hooks: FrameType, inner: list[FrameType]) -> _Culprit:
    """The culprit inside a repetition, from its `_hooks` frame and the frames it called."""
    state = hooks.f_locals.get("state")
    unit = hooks.f_locals.get("unit")
    agents: Mapping[str, Any] = getattr(state, "agents", None) or {}
    task = getattr(unit, "task", None)
    task_id = getattr(task, "id", None)
    repeat_idx = getattr(unit, "repeat_idx", None)
    context = getattr(state, "events_context", None)
    codes = _agent_codes(agents)
    name: str | None = None
    for frame in inner:  # innermost first
        if frame.f_code in codes:
            name = codes[frame.f_code]
            break
    if name is None:
        users = [frame for frame in inner if not frame.f_code.co_filename.startswith(_PACKAGE)]
        if users:
            name = users[-1].f_code.co_qualname  # the outermost of the benchmark's own code
        elif len(agents) == 1:
            name = next(iter(agents))
    return _Culprit(name, task_id, repeat_idx, context)


_LIBRARY_DIRS = tuple(
    {os.path.dirname(asyncio.__file__), os.path.dirname(anyio.__file__), _PACKAGE}
)


def _is_library(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS) or filename.startswith("<")


_watches: dict[asyncio.AbstractEventLoop, _LoopWatch] = {}
_watches_lock = threading.Lock()


def watch_loop(threshold_s: float, run_over: threading.Event) -> bool:
    """Watch the running asyncio loop (blocks, tasks left running) until `run_over` is set and
    every other run watching it has ended too. Returns False when there is no asyncio loop (trio:
    nothing to watch)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    with _watches_lock:
        watch = _watches.get(loop)
        if watch is None or watch._stopped:
            _watches[loop] = _LoopWatch(loop, threshold_s, run_over)
        else:
            watch.runs.append(run_over)
    return True


def recent_block(since: float) -> Block | None:
    """The longest loop block that ended after `since` (monotonic), on any loop watched."""
    with _watches_lock:
        blocks = [block for watch in _watches.values() for block in watch.blocks]
    found = [block for block in blocks if block.ended >= since]
    return max(found, key=lambda block: block.blocked_s, default=None)
