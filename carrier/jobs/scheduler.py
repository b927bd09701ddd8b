"""Scheduler: turns each schedule's next occurrence into a pending job, ahead of time.

Per schedule, the store keeps ``next_at``, the occurrence already materialized as a job (keyed
``schedule:<name>:<due iso>``). Each tick:

1. a schedule without ``next_at`` gets its first occurrence (compare-and-set from ``None``);
2. the job for ``next_at`` is ensured (an idempotent enqueue: it exists after a crash too);
3. once ``next_at`` has come, the schedule moves on to the following occurrence
   (compare-and-set from ``next_at``) and that job is ensured.

Several schedulers may tick the same store: the compare-and-set lets one of them pick each
occurrence (so a random jitter is drawn once), and the idempotency key makes its job once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import datetime

from carrier.jobs.base import JobStore
from carrier.jobs.clock import Clock, system_clock
from carrier.jobs.model import Job
from carrier.jobs.schedule import Schedule

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)


class Scheduler:
    """Materializes the schedules stored in ``store``. Usage::

    scheduler = Scheduler(store=jobs)
    await scheduler.add(Schedule(name="ig", kind="instagram.publish", spec=IntervalSpec(...)))
    task = asyncio.create_task(scheduler.run())
    ...
    await scheduler.stop()
    """

    def __init__(
        self,
        *,
        store: JobStore,
        clock: Clock = system_clock,
        rng: random.Random | None = None,
        poll_s: float = 15.0,
    ) -> None:
        if poll_s <= 0:
            raise ValueError("Scheduler needs poll_s > 0")
        self.store = store
        self.clock = clock
        self.rng = rng or random.Random()
        self.poll_s = poll_s
        self.errors = 0
        self._stop = asyncio.Event()

    async def add(self, schedule: Schedule) -> Schedule:
        """Store (or update) a schedule; unchanged, it keeps its progress."""
        return await self.store.put_schedule(schedule)

    async def tick(self) -> list[Job]:
        """Bring every enabled schedule up to date; returns the jobs ensured this tick."""
        now = self.clock()
        jobs: list[Job] = []
        for schedule in await self.store.list_schedules():
            if not schedule.enabled or schedule.finished:
                continue
            try:
                jobs += await self._advance(schedule, now)
            except Exception:
                # One broken schedule must not stop the others.
                self.errors += 1
                logger.exception("schedule %r could not be materialized", schedule.name)
        return jobs

    async def _advance(self, schedule: Schedule, now: datetime) -> list[Job]:
        name = schedule.name
        previous = schedule.next_at
        if previous is None:
            first = schedule.spec.first(now, self.rng)
            await self.store.advance_schedule(name, expected=None, next_at=first, now=now)
            reloaded = await self.store.get_schedule(name)  # ours, or another scheduler's
            if reloaded is None or reloaded.next_at is None:
                return []
            schedule, previous = reloaded, reloaded.next_at
        jobs = [await self._ensure(schedule, previous)]
        if now < previous:
            return jobs
        following = schedule.spec.following(previous, now, self.rng)
        moved = await self.store.advance_schedule(
            name,
            expected=previous,
            next_at=following if following is not None else previous,
            finished=following is None,
            now=now,
        )
        if moved and following is not None:
            jobs.append(await self._ensure(schedule, following))
            logger.info("schedule %r: next job due %s", name, following.isoformat())
        return jobs

    async def _ensure(self, schedule: Schedule, due: datetime) -> Job:
        return await self.store.enqueue(
            schedule.kind,
            payload=schedule.payload,
            agent_id=schedule.agent_id,
            run_at=due,
            max_attempts=schedule.max_attempts,
            timeout_s=schedule.timeout_s,
            idempotency_key=schedule.job_key(due),
        )

    async def run(self) -> None:
        """Tick every ``poll_s`` seconds until :meth:`stop` (after which it stays stopped)."""
        while not self._stop.is_set():
            try:
                await self.tick()
            except Exception:
                self.errors += 1
                logger.exception("scheduler tick failed; retrying in %s s", self.poll_s)
            try:
                async with asyncio.timeout(self.poll_s):
                    await self._stop.wait()
            except TimeoutError:
                pass

    async def stop(self) -> None:
        self._stop.set()
