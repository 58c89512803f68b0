"""`asynceval estimate`'s replay: repetitions measured in a sample, run again at a run's limits.

A `Template` is one measured repetition: its LLM calls in `Phase`s (calls that overlapped in the
sample, such as a judge panel's, go out together; calls one after the other are phases one after
the other), the slot time each attempt held, and the time the repetition spent outside calls
(its own work, tools, timeouts, backoffs) before each phase and after the last one.

`replay` runs templates as the engine runs repetitions: `max_concurrent_tasks` workers, each
taking the next repetition when its last one ends; `max_concurrent_llm_calls` slots granted in
FIFO order; a slot's holder then waits for its turn in the requests-per-minute and
tokens-per-minute windows, holding the slot meanwhile (as the funnel's gateway does). The windows
slide as `asynceval.limits.rate`'s do: the budget starts full, and a send's share comes back 60 s
plus the limiter's margin after it. Tokens are charged as the provider reported them (the
limiter charges an estimate, then settles to those).

A provider's announced budget (`Limits.burst`, `Limits.burst_reset_s`: its rate-limit headers'
remaining and reset) paces a run far more than its per-minute limit when it counts over a
shorter window (OpenAI enforces its limits over sub-minute periods; `asynceval sim serve --rpm 20
--rate-window 2` announces 600 a minute, 20 at a time): the funnel sends until the answers say
the budget is spent, then pauses the endpoint until the reset they announce. The replay does the
same: after `burst` sends, the next waits until `burst_reset_s` after the answer to the last of
them. It is a discrete-event simulation: about 2.5 us an attempt.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ..limits.rate import MARGIN_S

WINDOW_S = 60.0 + MARGIN_S
"""How long a send counts against a rate limit."""


@dataclass(frozen=True)
class Phase:
    """Calls a repetition sends together, after `think_s` of its own work."""

    think_s: float
    held_s: tuple[float, ...]


@dataclass(frozen=True)
class Template:
    """One measured repetition: its phases, the time after the last one, tokens per attempt."""

    phases: tuple[Phase, ...]
    tail_s: float
    tokens_per_attempt: float = 0.0

    @property
    def attempts(self) -> int:
        return sum(len(phase.held_s) for phase in self.phases)


@dataclass(frozen=True)
class Limits:
    """What bounds the run: slots, repetitions alive at once, rate windows (None: no limit)."""

    llm_calls: int
    tasks: int
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    burst: int | None = None  # requests the provider's announced budget holds ...
    burst_reset_s: float = 0.0  # ... and the pause, after the answer that spends it, to its reset


_SEND, _DONE, _END = 0, 1, 2
"""What happens at a moment of the replay: a phase sent, an attempt done, a repetition ended."""


class _Window:
    """A sliding window of sends: `limit` per `WINDOW_S`, the budget full at the start."""

    def __init__(self, limit: int) -> None:
        self.limit = float(limit)
        self.shares: deque[tuple[float, float]] = deque()
        self.total = 0.0

    def earliest(self, now: float, cost: float) -> float:
        cost = min(cost, self.limit)
        at = now
        while self.shares and self.total + cost > self.limit:
            sent, share = self.shares.popleft()
            self.total -= share
            at = max(at, sent + WINDOW_S)
        return at

    def add(self, at: float, cost: float) -> None:
        cost = min(cost, self.limit)
        self.shares.append((at, cost))
        self.total += cost


class _Replay:
    """One discrete-event replay of repetitions in order under `Limits`."""

    def __init__(self, reps: Sequence[Template], limits: Limits) -> None:
        self.reps = reps
        self.limits = limits
        self.heap: list[tuple[float, int, int, int]] = []  # (time, seq, kind, index)
        self.seq = 0
        self.free_slots = limits.llm_calls
        self.line: deque[tuple[int, float]] = deque()  # (repetition, held_s) waiting for a slot
        self.last_send = -math.inf
        self.windows = [
            (_Window(limit), per_tokens)
            for limit, per_tokens in (
                (limits.requests_per_minute, False),
                (limits.tokens_per_minute, True),
            )
            if limit is not None
        ]
        self.burst_used = 0  # sends since the announced budget was last whole
        self.burst_until = -math.inf  # when it is whole again
        self.phase = [0] * len(reps)
        self.outstanding = [0] * len(reps)
        self.finished: list[float] = []
        self.next_rep = 0

    def _at(self, time: float, kind: int, index: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, self.seq, kind, index))

    def _start_next(self, now: float) -> None:
        if self.next_rep < len(self.reps):
            index, self.next_rep = self.next_rep, self.next_rep + 1
            self._next_phase(index, now)

    def _next_phase(self, index: int, now: float) -> None:
        rep, number = self.reps[index], self.phase[index]
        if number < len(rep.phases):
            self._at(now + rep.phases[number].think_s, _SEND, index)
        else:
            self._at(now + rep.tail_s, _END, index)

    def _grant(self, now: float) -> None:
        while self.free_slots and self.line:
            index, held = self.line.popleft()
            self.free_slots -= 1
            send = max(now, self.last_send)
            tokens = self.reps[index].tokens_per_attempt
            for window, per_tokens in self.windows:
                send = max(send, window.earliest(send, tokens if per_tokens else 1.0))
            send = self._announced(send, held)
            for window, per_tokens in self.windows:
                window.add(send, tokens if per_tokens else 1.0)
            self.last_send = send
            self._at(send + held, _DONE, index)

    def _announced(self, send: float, held: float) -> float:
        """When a send may go by the provider's announced budget (later than `send` when the
        budget is spent), counted as sent."""
        burst = self.limits.burst
        if burst is None:
            return send
        if self.burst_used >= burst:
            send = max(send, self.burst_until)
            self.burst_used = 0
        self.burst_used += 1
        if self.burst_used >= burst:  # its answer says the budget is spent: pause to the reset
            self.burst_until = send + held + self.limits.burst_reset_s
        return send

    def run(self) -> list[float]:
        """The time each repetition ended, in the order they ended."""
        for _ in range(min(self.limits.tasks, len(self.reps))):
            self._start_next(0.0)
        while self.heap:
            now, _, kind, index = heapq.heappop(self.heap)
            if kind == _SEND:
                held = self.reps[index].phases[self.phase[index]].held_s
                self.outstanding[index] = len(held)
                self.line.extend((index, h) for h in held)
                if not held:
                    self.phase[index] += 1
                    self._next_phase(index, now)
            elif kind == _DONE:
                self.free_slots += 1
                self.outstanding[index] -= 1
                if self.outstanding[index] == 0:
                    self.phase[index] += 1
                    self._next_phase(index, now)
            else:
                self.finished.append(now)
                self._start_next(now)
            self._grant(now)
        return self.finished


def replay(reps: Sequence[Template], limits: Limits) -> list[float]:
    """When each of `reps`, started in order, ends (seconds from the start, in end order)."""
    return _Replay(reps, limits).run()


def rate_floor(calls: float, tokens: float, limits: Limits) -> float:
    """The least time `calls` sends of `tokens` in all can take under the rate windows and the
    announced budget: the last send waits for as many whole windows (or resets) as the budget
    is exceeded."""
    floor = 0.0
    for amount, limit in ((calls, limits.requests_per_minute), (tokens, limits.tokens_per_minute)):
        if limit and amount > limit:
            floor = max(floor, math.ceil(amount / limit - 1) * WINDOW_S)
    if limits.burst and calls > limits.burst:
        floor = max(floor, math.ceil(calls / limits.burst - 1) * limits.burst_reset_s)
    return floor
