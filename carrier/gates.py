"""Admission to a turn's busy stages: small FIFO gates, and what they say about the load.

Under load, every turn of an agent used to run every stage at once: 200 conversations meant 200
turns storing, embedding and recalling together, each stage taking seconds instead of
milliseconds, and throughput fell as conversations grew. A :class:`Gate` lets ``size`` turns
into a stage and queues the rest in order of arrival (fair across rooms: a turn's place is its
arrival, and one turn per room runs at a time anyway), so the turns inside finish at their idle
pace and the queue moves. The model call passes no CPU gate: it waits on the model only (or on
an optional cap of concurrent model calls).

The gates also know the load: how many turns wait, and roughly how long a turn arriving now
would wait (each gate's queue times its recent hold time, over its size). Clients use it to
answer overload: the API refuses a message it could not answer in time (429 with
``Retry-After``) before storing it; Discord never refuses, it shows the typing indicator and
pauses the turn briefly. And they know when no turn is at a stage of CPU work (every gate but
the model's): the agent's background work waits for that (:meth:`Gates.quiet`), so a fact
extraction does not take the event loop, or the GIL, from a turn's embedding or recall.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass

__all__ = ["Gate", "Gates", "Load"]

_SMOOTHING = 0.2
"""Weight of the newest hold time in a gate's running mean."""


class Gate:
    """At most ``size`` holders at once; the others wait in arrival order. ``size`` 0: no bound
    (holders are still counted, and timed)."""

    def __init__(self, name: str, size: int, *, busy: _Busy | None = None) -> None:
        if size < 0:
            raise ValueError(f"gate {name!r}: size must be 0 (no bound) or more, not {size}")
        self.name = name
        self.size = size
        self.holders = 0
        self.peak = 0
        """The most holders seen at once (for tests and benchmarks)."""
        self.entered = 0
        self.hold_s = 0.0
        """Running mean of how long a holder stays (seconds)."""
        self._timed = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._grew = asyncio.Event()
        self._busy = busy
        """Counts this gate's holders with those of the agent's other CPU gates (None: a gate
        whose holders wait on something else, the model's)."""

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def queued(self, n: int) -> None:
        """Return once at least ``n`` turns wait here (tests and benchmarks watch the queue
        with it instead of polling)."""
        while len(self._waiters) < n:
            self._grew.clear()
            await self._grew.wait()

    def wait_estimate(self) -> float:
        """Seconds a turn arriving now would likely wait here."""
        if self.size == 0 or (self.holders < self.size and not self._waiters):
            return 0.0
        return (len(self._waiters) + 1) * self.hold_s / self.size

    def enter(self) -> _Pass:
        """Hold the gate for an ``async with``."""
        return _Pass(self, None)

    def _held(self, seconds: float) -> None:
        self._timed += 1
        first = self._timed == 1
        self.hold_s = seconds if first else self.hold_s + _SMOOTHING * (seconds - self.hold_s)

    async def _acquire(self) -> None:
        if self.size == 0 or (self.holders < self.size and not self._waiters):
            self._take()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._grew.set()
        try:
            await waiter  # resolved by a release, which hands its place over (no barging)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the place was handed over just as the turn was cancelled
            else:
                self._waiters.remove(waiter)
            raise
        self.entered += 1

    def _take(self) -> None:
        self.holders += 1
        self.entered += 1
        self.peak = max(self.peak, self.holders)
        if self._busy is not None:
            self._busy.add(1)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the place passes on: holders stays as it is
                return
        self.holders -= 1
        if self._busy is not None:
            self._busy.add(-1)


class _Pass:
    """A gate held for an ``async with`` (:meth:`Gate.enter`, :meth:`Gates.enter`): a plain
    object rather than a generator's context manager, as a turn passes six gates. How long the
    turn queued goes into ``waits`` (milliseconds, by gate name); ``gate`` None passes at once."""

    __slots__ = ("_gate", "_started", "_waits")

    def __init__(self, gate: Gate | None, waits: dict[str, float] | None) -> None:
        self._gate = gate
        self._waits = waits
        self._started = 0.0

    async def __aenter__(self) -> None:
        gate = self._gate
        if gate is None:
            return
        queued = time.perf_counter()
        await gate._acquire()
        self._started = time.perf_counter()
        if self._waits is not None:
            self._waits[gate.name] = round((self._started - queued) * 1000, 3)

    async def __aexit__(self, *exc_info: object) -> None:
        gate = self._gate
        if gate is not None:
            gate._held(time.perf_counter() - self._started)
            gate._release()


class _Busy:
    """How many turns hold the CPU gates of one agent, and an event set while none does."""

    def __init__(self) -> None:
        self.holders = 0
        self.quiet = asyncio.Event()
        self.quiet.set()

    def add(self, n: int) -> None:
        self.holders += n
        if self.holders:
            self.quiet.clear()
        else:
            self.quiet.set()


@dataclass(frozen=True)
class Load:
    """What an agent's gates say about its load, now."""

    waiting: int
    """Turns queued at a gate."""
    wait_s: float
    """Roughly how long a turn arriving now would queue before its stages (seconds)."""
    limit_s: float
    """The longest wait the agent takes on; beyond it, it is overloaded."""

    @property
    def overloaded(self) -> bool:
        return self.wait_s > self.limit_s


class Gates:
    """An agent's gates by stage name. ``waiting_on_model`` names the gates whose holders wait
    on the model, not on this process's CPU: they do not keep the agent from being
    :meth:`quiet`."""

    def __init__(
        self,
        sizes: Mapping[str, int],
        *,
        limit_s: float,
        waiting_on_model: Collection[str] = (),
    ) -> None:
        self._busy = _Busy()
        self.by_name = {
            name: Gate(name, size, busy=None if name in waiting_on_model else self._busy)
            for name, size in sizes.items()
        }
        self.limit_s = limit_s

    @property
    def busy(self) -> bool:
        """Whether a turn holds (or waits at) a gate of CPU work."""
        return self._busy.holders > 0

    async def quiet(self) -> None:
        """Return once no turn holds or waits at a gate of CPU work (at once if none does)."""
        while self._busy.holders:
            await self._busy.quiet.wait()

    def get(self, name: str) -> Gate | None:
        return self.by_name.get(name)

    def enter(self, name: str | None, waits: dict[str, float] | None = None) -> _Pass:
        """Hold the gate ``name`` for an ``async with`` (a stage with no gate passes at once);
        how long the turn queued for it goes into ``waits`` (milliseconds, by gate name)."""
        return _Pass(self.by_name.get(name) if name is not None else None, waits)

    def load(self) -> Load:
        gates = self.by_name.values()
        return Load(
            waiting=sum(g.waiting for g in gates),
            wait_s=sum(g.wait_estimate() for g in gates),
            limit_s=self.limit_s,
        )
