"""Work that follows a turn without holding it: one agent's bounded background queue.

Fact extraction, summaries and other evaluators that do not change the reply used to run inside
the turn, under the room's lock and the turn's model deadline, so a second model call held the
reply, the message's status and the outbox. They run here instead, after the turn:

* **bounded**: a few workers per agent and a bounded backlog of jobs waiting for them;
* **coalesced**: one waiting job per key (an evaluator in a room): a busy room queues one
  catch-up, not one job per message; the newest turn's job replaces the one waiting;
* **forgetful on purpose**: when the backlog is full the oldest waiting job is dropped (logged at
  debug). Nothing is lost by that, nor by a crash: what a job does is computed from the store (a
  watermark of what it has read), so the next turn in that room catches up on it;
* **on its own deadline**: each job's model calls end within ``deadline_s``, never the turn's
  (workers run in a fresh context, so no turn's deadline reaches them); a job's failure is
  logged, never raised;
* **drained at stop**: :meth:`BackgroundWork.close` lets the jobs running and waiting finish for
  a short grace, then cancels the rest (the next turn catches up on them);
* **second to the turns**: a job starts once no turn is at a stage of CPU work (``turns``, the
  agent's :class:`~carrier.gates.Gates`), so its Python does not hold a turn's stages up
  or slow its embedding (the embedder's thread needs the GIL between its operations); it waits
  at most ``patience_s`` from its submission, and not at all while the backlog is half full or
  the queue is closing, so a busy agent still gets through its background work, only later.

``await work.join()`` returns once nothing waits or runs: tests and shutdown wait on it instead
of sleeping.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from carrier.errors import ProviderError
from carrier.llm.deadline import model_deadline

__all__ = ["BackgroundStats", "BackgroundWork", "Busy", "Job", "JobKey"]

log = logging.getLogger(__name__)


class Busy(Protocol):
    """What background work asks of the turns it yields to (:class:`carrier.gates.Gates`)."""

    @property
    def busy(self) -> bool:
        """Whether a turn is at a stage of CPU work now."""
        ...

    async def quiet(self) -> None:
        """Return once no turn is."""
        ...


JobKey = tuple[str, str]
"""What a job does and where: ``(evaluator name, room id)``. One waits per key at a time, and
jobs of one key never run at once."""
Job = Callable[[], Awaitable[None]]


@dataclass
class BackgroundStats:
    """Counts since the queue was made (for tests, benchmarks and the logs)."""

    submitted: int = 0
    coalesced: int = 0
    """Submitted while a job of the same key was waiting: that one was replaced."""
    dropped: int = 0
    """Waiting jobs dropped because the backlog was full, or because the queue closed."""
    done: int = 0
    failed: int = 0


class BackgroundWork:
    """One agent's background queue; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        workers: int = 2,
        backlog: int = 64,
        deadline_s: float | None = 60.0,
        drain_s: float = 5.0,
        turns: Busy | None = None,
        patience_s: float = 2.0,
    ) -> None:
        if workers < 1 or backlog < 1:
            raise ValueError("background work needs at least one worker and a backlog of one")
        if patience_s < 0:
            raise ValueError(f"patience_s must be 0 or more, not {patience_s}")
        self.name = name
        self.workers = workers
        self.backlog = backlog
        self.deadline_s = deadline_s
        self.drain_s = drain_s
        self.turns = turns
        """Whether the agent's turns are at their stages of CPU work, which jobs wait out (None:
        jobs start at once)."""
        self.patience_s = patience_s
        self.stats = BackgroundStats()
        self._pending: OrderedDict[JobKey, Job] = OrderedDict()
        self._since: dict[JobKey, float] = {}
        """When each waiting key was first submitted (a replaced job keeps its age)."""
        self._running: set[JobKey] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        """Set when a job may be ready for a worker."""
        self._idle = asyncio.Event()
        """Set while no job waits or runs."""
        self._nudge = asyncio.Event()
        """Set when jobs waiting for the turns must start now (a backlog half full, a close)."""
        self._idle.set()
        self._closed = False

    @property
    def waiting(self) -> int:
        """Jobs waiting for a worker."""
        return len(self._pending)

    @property
    def running(self) -> int:
        return len(self._running)

    def submit(self, key: JobKey, job: Job) -> None:
        """Queue ``job`` under ``key``; returns at once. A job of the same key that is still
        waiting is replaced (it would read the same store, only less of it)."""
        if self._closed:
            log.debug("%s: stopping; %s in room %s is left for the next turn", self.name, *key)
            self.stats.dropped += 1
            return
        self.stats.submitted += 1
        if key in self._pending:
            self._pending[key] = job  # keeps its place in the line
            self.stats.coalesced += 1
        else:
            if len(self._pending) >= self.backlog:
                (old_what, old_room), _ = self._pending.popitem(last=False)
                self._since.pop((old_what, old_room), None)
                self.stats.dropped += 1
                log.debug(
                    "%s: background backlog full (%d); dropped %s in room %s, which its next "
                    "turn catches up on",
                    self.name,
                    self.backlog,
                    old_what,
                    old_room,
                )
            self._pending[key] = job
            self._since[key] = time.monotonic()
            if 2 * len(self._pending) >= self.backlog:
                self._nudge.set()
        self._idle.clear()
        self._start_workers()
        self._wake.set()

    async def join(self) -> None:
        """Return once no job waits or runs (at once if none was ever submitted)."""
        await self._idle.wait()

    async def close(self, grace: float | None = None) -> None:
        """Stop taking jobs, let the queued ones finish for up to ``grace`` seconds (default
        :attr:`drain_s`), then cancel what is left. Safe to call twice."""
        self._closed = True
        self._nudge.set()
        if self._tasks:
            try:
                await asyncio.wait_for(self.join(), self.drain_s if grace is None else grace)
            except TimeoutError:
                log.info(
                    "%s: %d background job(s) cut short at stop (%d waiting); the next turn in "
                    "their rooms catches up on them",
                    self.name,
                    len(self._running),
                    len(self._pending),
                )
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.stats.dropped += len(self._pending)
        self._pending.clear()
        self._since.clear()
        self._running.clear()
        self._settle()

    # -- workers ---------------------------------------------------------------------------------
    def _start_workers(self) -> None:
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        for i in range(self.workers):
            # A fresh context: a job started from inside a turn must not inherit the turn's
            # model deadline (nor who the turn acts for).
            self._tasks.append(
                loop.create_task(
                    self._work(), name=f"{self.name}-background-{i}", context=contextvars.Context()
                )
            )

    def _settle(self) -> None:
        if not self._pending and not self._running:
            self._idle.set()

    async def _yield(self, wait: float) -> None:
        """Wait until the turns are quiet, or a nudge, or ``wait`` seconds have passed."""
        assert self.turns is not None
        self._nudge.clear()  # no await since the look at the backlog: a nudge is not missed
        waits = [
            asyncio.ensure_future(self.turns.quiet()),
            asyncio.ensure_future(self._nudge.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    def _patience_left(self, key: JobKey) -> float:
        """How much longer the job of ``key`` may wait for the turns (0: it starts now)."""
        if (
            self.turns is None
            or not self.turns.busy
            or self._closed
            or 2 * len(self._pending) >= self.backlog
        ):
            return 0.0
        return max(0.0, self._since.get(key, 0.0) + self.patience_s - time.monotonic())

    def _next(self) -> JobKey | None:
        return next((k for k in self._pending if k not in self._running), None)

    async def _work(self) -> None:
        while True:
            key = self._next()
            if key is None:
                # No await between the look and the clear: a submit cannot slip in between.
                self._wake.clear()
                await self._wake.wait()
                continue
            wait = self._patience_left(key)
            if wait > 0:
                await self._yield(wait)
                continue  # look again: the line may have changed while this worker waited
            job = self._pending.pop(key)
            self._since.pop(key, None)
            self._running.add(key)
            try:
                await self._run(key, job)
            finally:
                self._running.discard(key)
                self._wake.set()  # a job of the same key may have been waiting for this one
                self._settle()

    async def _run(self, key: JobKey, job: Job) -> None:
        what, room = key
        try:
            with model_deadline(self.deadline_s):
                await job()
        except ProviderError as exc:
            # No answer from the model: not a bug; the work is tried again after a later turn.
            self.stats.failed += 1
            log.info(
                "%s: %s in room %s had no answer from the model: %s", self.name, what, room, exc
            )
        except Exception:
            self.stats.failed += 1
            log.exception(
                "%s: %s failed in room %s; a later turn tries again", self.name, what, room
            )
        else:
            self.stats.done += 1
