"""Worker: claims due jobs from a JobStore and runs their handlers.

Several workers (tasks or processes, on one machine or many) may share a store: claims are atomic
and leased, so a due job runs once. A worker renews the leases of the jobs it runs every third of
the lease (10 s by default, ``CARRIER_JOB_LEASE_SECONDS``), so one that dies leaves its jobs to
the others within about a lease; such a takeover counts as a crash, not an attempt. Usage::

    worker = Worker(store=jobs, max_concurrent=4)
    worker.register("instagram.publish", publish, max_concurrent=1)
    task = asyncio.create_task(worker.run())
    ...
    await worker.stop(grace_s=30)   # finish in-flight jobs, release what is left

Cancelling the ``run()`` task instead abandons in-flight jobs as a crash would (nothing is
written; their leases expire and another worker takes them over).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from carrier.jobs import transitions as t
from carrier.jobs._run import JobRunner, WorkerStats
from carrier.jobs.backoff import Backoff
from carrier.jobs.base import JobStore
from carrier.jobs.clock import Clock, system_clock
from carrier.jobs.errors import JobNotFound, JobStateError, LeaseLost
from carrier.jobs.handler import Handler
from carrier.jobs.model import Job, JobState

__all__ = ["Worker", "WorkerStats"]

logger = logging.getLogger(__name__)


def default_worker_id() -> str:
    """``host-pid-random``: unique per worker, readable in ``carrier jobs list``."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class _Registration:
    handler: Handler
    max_concurrent: int | None


class Worker(JobRunner):
    """Runs the handlers registered by kind on jobs claimed from ``store``.

    ``lease_s``: how long a claim holds without renewal (renewed every ``lease_s / 3`` while the
    handler runs): after a crash, the time until another worker takes the job over.
    ``max_concurrent``: jobs this worker runs at once. ``default_timeout_s``: time limit of an
    attempt whose job sets none. ``approval_ttl_s``: how long a job awaits approval
    before it becomes ``expired_approval_state`` (``None``: forever); the worker looks for
    expired approvals every ``approval_check_s`` (clock time).
    """

    def __init__(
        self,
        *,
        store: JobStore,
        worker_id: str | None = None,
        clock: Clock = system_clock,
        lease_s: float = 10.0,
        poll_s: float = 2.0,
        max_concurrent: int = 8,
        default_timeout_s: float | None = 600.0,
        backoff: Backoff | None = None,
        approval_ttl_s: float | None = 72 * 3600.0,
        expired_approval_state: JobState = JobState.CANCELLED,
        approval_check_s: float = 10.0,
        services: Mapping[str, Any] | None = None,
    ) -> None:
        if lease_s <= 0 or poll_s <= 0 or max_concurrent < 1:
            raise ValueError("Worker needs lease_s > 0, poll_s > 0 and max_concurrent >= 1")
        super().__init__(
            store=store,
            worker_id=worker_id or default_worker_id(),
            clock=clock,
            default_timeout_s=default_timeout_s,
            backoff=backoff or Backoff(),
            approval_ttl_s=approval_ttl_s,
            services=services or {},
            lease_s=lease_s,
        )
        self.poll_s = poll_s
        self.max_concurrent = max_concurrent
        self.expired_approval_state = expired_approval_state
        self.approval_check_s = approval_check_s
        self._registry: dict[str, _Registration] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._running = False
        self._stopping = False
        self._grace_s: float | None = None
        self._stopped = asyncio.Event()
        self._approvals_checked: datetime | None = None

    def __repr__(self) -> str:
        return f"Worker(id={self.worker_id!r}, kinds={sorted(self._registry)})"

    # -- handlers --------------------------------------------------------------------------
    def register(self, kind: str, handler: Handler, *, max_concurrent: int | None = None) -> None:
        """Run ``handler`` for jobs of ``kind``; at most ``max_concurrent`` of them at once
        across every worker sharing the store (``None``: no limit but the worker's own)."""
        if kind in self._registry:
            raise ValueError(f"a handler for job kind {kind!r} is already registered")
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent for {kind!r} must be at least 1")
        self._registry[kind] = _Registration(handler, max_concurrent)

    def unregister(self, kind: str) -> None:
        self._registry.pop(kind, None)

    @property
    def kinds(self) -> list[str]:
        return sorted(self._registry)

    @property
    def in_flight(self) -> list[str]:
        """Ids of the jobs this worker is running."""
        return list(self._tasks)

    def _handler(self, kind: str) -> Handler | None:
        registration = self._registry.get(kind)
        return registration.handler if registration is not None else None

    def notify(self) -> None:
        """Look for due jobs now rather than at the next poll (after enqueueing one)."""
        self._wake.set()

    # -- one step --------------------------------------------------------------------------
    async def tick(self) -> int:
        """Claim as many due jobs as there is room for and start them; returns how many."""
        now = self.clock()
        await self._expire_approvals(now)
        free = self.max_concurrent - len(self._tasks)
        if self._stopping or free <= 0 or not self._registry:
            return 0
        claimed: list[Job] = []
        # Kinds with a concurrency limit claim one by one (the store checks the limit inside
        # the claim); the others share one claim.
        for kind, registration in sorted(self._registry.items()):
            room = free - len(claimed)
            if registration.max_concurrent is None or room <= 0:
                continue
            claimed += await self.store.claim(
                self.worker_id,
                [kind],
                lease_s=self.lease_s,
                limit=room,
                max_active=registration.max_concurrent,
                now=now,
            )
        unlimited = [k for k, r in sorted(self._registry.items()) if r.max_concurrent is None]
        if unlimited and free > len(claimed):
            claimed += await self.store.claim(
                self.worker_id, unlimited, lease_s=self.lease_s, limit=free - len(claimed), now=now
            )
        for job in claimed:
            self._launch(job)
        return len(claimed)

    def _launch(self, job: Job) -> None:
        if job.id in self._tasks:
            # Our own lease lapsed (the loop stalled longer than a lease) and we claimed the job
            # back: its handler still runs here, under the renewed lease.
            logger.warning("worker %s: its lease of job %s had lapsed", self.worker_id, job.id)
            return
        self.stats.claimed += 1
        if t.taken_over(job):
            self.stats.taken_over += 1
            lost = job.history[-2].worker
            logger.warning(
                "worker %s takes over job %s (%s) from %s, whose lease expired (crash %d/%d)",
                self.worker_id,
                job.id,
                job.kind,
                lost,
                job.crashes,
                job.max_crashes,
            )
        task = asyncio.create_task(self.execute(job), name=f"job {job.kind} {job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        for job_id, running in list(self._tasks.items()):
            if running is task:
                del self._tasks[job_id]
        self._wake.set()

    async def _expire_approvals(self, now: datetime) -> None:
        last = self._approvals_checked
        if last is not None and now - last < timedelta(seconds=self.approval_check_s):
            return
        self._approvals_checked = now
        for job in await self.store.expire_approvals(to=self.expired_approval_state, now=now):
            logger.info("job %s (%s) %s: %s", job.id, job.kind, job.state, job.last_error)

    async def renew_leases(self) -> None:
        """Extend the lease of every job this worker runs. A job taken over or cancelled
        meanwhile has its handler cancelled."""
        for job_id in list(self._tasks):
            try:
                await self.store.heartbeat(
                    job_id, self.worker_id, lease_s=self.lease_s, now=self.clock()
                )
            except (LeaseLost, JobStateError, JobNotFound) as exc:
                task = self._tasks.get(job_id)
                if task is None or job_id not in self._handling:
                    continue  # finished meanwhile: its own write settled it
                logger.warning("worker %s stops job %s: %s", self.worker_id, job_id, exc)
                self.stats.lost += 1
                self._lost.add(job_id)
                task.cancel()
            except Exception:
                logger.exception(
                    "worker %s: renewing the lease of job %s failed", self.worker_id, job_id
                )
                self.stats.errors += 1

    async def join(self) -> None:
        """Wait until the jobs in flight have finished (claims no more)."""
        while self._tasks:
            await asyncio.wait(list(self._tasks.values()))

    # -- loops -----------------------------------------------------------------------------
    async def drain(self) -> None:
        """Run due jobs until none is due and none is running. For one-shot runs, tests and
        benchmarks; a service calls :meth:`run`."""
        while True:
            launched = await self.tick()
            if self._tasks:
                await asyncio.wait(list(self._tasks.values()), return_when=asyncio.FIRST_COMPLETED)
            elif not launched:
                return

    async def run(self) -> None:
        """Poll and run jobs until :meth:`stop`. Never dies of one bad job or a store hiccup."""
        if self._running:
            raise RuntimeError(f"worker {self.worker_id} is already running")
        if self._stopping:
            return  # stopped before it started; a stopped worker stays stopped
        self._running = True
        beat = asyncio.create_task(self._beat(), name=f"worker {self.worker_id} leases")
        logger.info("worker %s started for %s", self.worker_id, ", ".join(self.kinds) or "no kinds")
        try:
            while not self._stopping:
                self._wake.clear()
                try:
                    launched = await self.tick()
                except Exception:
                    logger.exception("worker %s: looking for jobs failed", self.worker_id)
                    self.stats.errors += 1
                    launched = 0
                if launched:
                    continue  # more may be due
                try:
                    async with asyncio.timeout(self.poll_s):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            await self._shutdown()
        finally:
            beat.cancel()
            for task in self._tasks.values():  # only when run() itself was cancelled
                task.cancel()
            self._running = False
            self._stopped.set()
            logger.info("worker %s stopped (%s)", self.worker_id, self.stats)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            await self.renew_leases()

    async def stop(self, *, grace_s: float | None = 30.0) -> None:
        """Stop claiming; give in-flight jobs ``grace_s`` seconds to finish (``None``: as long
        as they take), then cancel their handlers and release the jobs, attempts refunded.
        A stopped worker stays stopped (make a new one to start again)."""
        self._grace_s = grace_s
        self._stopping = True
        self._wake.set()
        if self._running:
            await self._stopped.wait()
        else:
            await self._shutdown()

    async def _shutdown(self) -> None:
        tasks = dict(self._tasks)
        if tasks:
            logger.info("worker %s stopping: %d job(s) in flight", self.worker_id, len(tasks))
            _, pending = await asyncio.wait(tasks.values(), timeout=self._grace_s)
            if pending:
                self._abandon = True  # a job between claim and handler releases itself
                for job_id, task in tasks.items():
                    if task in pending and job_id in self._handling:
                        self._releasing.add(job_id)
                        task.cancel()
                await asyncio.wait(pending)
        for job_id in sorted(self._releasing):
            try:
                await self.store.release(job_id, self.worker_id, now=self.clock())
                self.stats.released += 1
                logger.info("worker %s released job %s", self.worker_id, job_id)
            except Exception as exc:
                logger.warning(
                    "worker %s could not release job %s: %s", self.worker_id, job_id, exc
                )
        self._releasing.clear()
