"""The JobStore: durable jobs and schedules behind one store-agnostic interface.

A backend implements a few primitives: insert with idempotency, get, list, an atomic
**claim**, an atomic read-modify-write of one job (:meth:`JobStore._modify`), a lease renewal
that is one conditional update on the job's id and owner (:meth:`JobStore._renew`), a count of
active jobs, and the schedule table with a compare-and-set. Every state change (start, succeed,
fail, defer, approve, ...) is built here on :meth:`_modify` with the pure rules of
:mod:`carrier.jobs.transitions`, so each backend enforces the same state machine.

SQLite does the claim in one ``BEGIN IMMEDIATE`` transaction; a MongoDB backend would claim with
``find_one_and_update`` (filter: claimable; update: lease) and modify with a compare-and-set on a
version field. Every backend passes ``tests/jobs/test_store_contract.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self

from carrier.jobs import transitions as t
from carrier.jobs.clock import Clock, system_clock
from carrier.jobs.errors import JobNotFound, JobStateError
from carrier.jobs.model import Job, JobEvent, JobState
from carrier.jobs.schedule import Schedule

__all__ = ["JobStore"]


class JobStore(ABC):
    """Jobs and schedules of every agent. Coroutine-safe; several processes may share one
    backing database. Times default to the injected ``clock``; pass ``now=`` to override."""

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self.clock = clock

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    async def open(self) -> None:
        """Connect, create tables and indexes idempotently, run migrations."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- backend primitives ----------------------------------------------------------------
    @abstractmethod
    async def _insert(self, job: Job) -> Job:
        """Store a new job; if one with the same ``idempotency_key`` exists, return that one
        unchanged instead (atomically: two racing inserts of one key make one job)."""

    @abstractmethod
    async def _modify(self, job_id: str, change: Callable[[Job], Job]) -> Job:
        """Atomically read the job, apply ``change`` and write the result; return it. Raises
        :class:`JobNotFound`, or whatever ``change`` raises (nothing is written then)."""

    @abstractmethod
    async def _renew(
        self, job_id: str, worker_id: str, *, expires: datetime, now: datetime
    ) -> Job | None:
        """One atomic conditional update: set the lease of job ``job_id`` to expire at
        ``expires`` only if it is claimed or running under ``worker_id``; the updated job, or
        ``None`` when nothing matched (no such job, another owner, no longer held)."""

    @abstractmethod
    async def get(self, job_id: str) -> Job | None: ...

    @abstractmethod
    async def list_jobs(
        self,
        *,
        states: Sequence[JobState] | None = None,
        kind: str | None = None,
        agent_id: str | None = None,
        limit: int | None = 100,
    ) -> list[Job]:
        """Jobs matching every filter given, newest first; ``limit=None`` for all."""

    @abstractmethod
    async def claim(
        self,
        worker_id: str,
        kinds: Sequence[str],
        *,
        lease_s: float,
        limit: int = 1,
        max_active: int | None = None,
        now: datetime | None = None,
    ) -> list[Job]:
        """Atomically lease up to ``limit`` claimable jobs of ``kinds`` to ``worker_id``, due first.

        Claimable: pending with ``run_at <= now``, or claimed/running under an expired lease (its
        worker died). A pending job's claim counts an attempt; taking over an expired lease counts
        a crash instead (see :func:`carrier.jobs.transitions.claim`), and a job past its crash
        budget is failed (or, committed, succeeded with a warning) instead of returned. With
        ``max_active``, no more are claimed than keep the jobs of ``kinds`` held under live leases
        (by any worker) at or below it. Two callers, in any processes, never receive the same job
        for the same lease.
        """

    @abstractmethod
    async def count_active(self, kind: str, *, now: datetime | None = None) -> int:
        """Jobs of ``kind`` claimed or running under a live lease."""

    # -- schedules -------------------------------------------------------------------------
    @abstractmethod
    async def put_schedule(self, schedule: Schedule) -> Schedule:
        """Insert or replace by name. Stored again with the same definition, a schedule keeps
        its progress (``next_at``, ``finished``, ``created_at``); a changed one starts afresh."""

    @abstractmethod
    async def get_schedule(self, name: str) -> Schedule | None: ...

    @abstractmethod
    async def list_schedules(self) -> list[Schedule]:
        """All schedules, by name."""

    @abstractmethod
    async def delete_schedule(self, name: str) -> bool:
        """True if it existed. Jobs it already created stay."""

    @abstractmethod
    async def advance_schedule(
        self,
        name: str,
        *,
        expected: datetime | None,
        next_at: datetime | None,
        finished: bool = False,
        now: datetime | None = None,
    ) -> bool:
        """Compare-and-set: move the schedule to ``next_at`` only if its ``next_at`` is still
        ``expected``. False when another scheduler got there first (or the schedule is gone)."""

    # -- the state machine, on top of the primitives ---------------------------------------
    def _now(self, now: datetime | None) -> datetime:
        return now if now is not None else self.clock()

    async def enqueue(
        self,
        kind: str,
        *,
        payload: dict[str, Any] | None = None,
        agent_id: str | None = None,
        run_at: datetime | None = None,
        max_attempts: int = 3,
        max_crashes: int = 10,
        timeout_s: float | None = None,
        idempotency_key: str | None = None,
        now: datetime | None = None,
    ) -> Job:
        """Add a pending job due at ``run_at`` (default: now). With an ``idempotency_key`` that
        is already taken, nothing is added and the existing job is returned. ``max_crashes``:
        how many times it may be taken over from a lost worker before it fails."""
        now = self._now(now)
        job = Job(
            kind=kind,
            payload=payload or {},
            agent_id=agent_id,
            run_at=run_at or now,
            max_attempts=max_attempts,
            max_crashes=max_crashes,
            timeout_s=timeout_s,
            idempotency_key=idempotency_key,
            created_at=now,
            updated_at=now,
            history=[JobEvent(at=now, state=JobState.PENDING, note="enqueued")],
        )
        return await self._insert(job)

    async def start(self, job_id: str, worker_id: str, *, now: datetime | None = None) -> Job:
        """claimed → running. Raises :class:`LeaseLost` if ``worker_id`` no longer holds it."""
        at = self._now(now)
        return await self._modify(job_id, lambda job: t.start(job, worker_id=worker_id, now=at))

    async def heartbeat(
        self, job_id: str, worker_id: str, *, lease_s: float, now: datetime | None = None
    ) -> Job:
        """Renew the lease to ``now + lease_s``, with one conditional update on the job's id and
        owner: :class:`LeaseLost` if another worker took it over or it was cancelled (the worker
        should stop the handler), :class:`JobNotFound` if it is gone."""
        at = self._now(now)
        renewed = await self._renew(
            job_id, worker_id, expires=at + timedelta(seconds=lease_s), now=at
        )
        if renewed is not None:
            return renewed
        job = await self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        t.heartbeat(job, worker_id=worker_id, now=at, lease_s=lease_s)  # raises LeaseLost
        raise JobStateError(job_id, job.state, "renew its lease (it changed meanwhile)")

    async def checkpoint(
        self,
        job_id: str,
        worker_id: str,
        *,
        progress: Mapping[str, Any],
        committed: bool = False,
        now: datetime | None = None,
    ) -> Job:
        """Record how far the running job got (``progress``, merged into the job's) and, with
        ``committed``, that its outside effect is done: the job can no longer fail."""
        at = self._now(now)
        return await self._modify(
            job_id,
            lambda job: t.checkpoint(
                job, worker_id=worker_id, now=at, progress=dict(progress), committed=committed
            ),
        )

    async def succeed(
        self,
        job_id: str,
        worker_id: str,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Job:
        at = self._now(now)
        return await self._modify(
            job_id, lambda job: t.succeed(job, worker_id=worker_id, now=at, result=result)
        )

    async def fail(
        self,
        job_id: str,
        worker_id: str,
        *,
        error: str,
        retry_at: datetime | None,
        now: datetime | None = None,
    ) -> Job:
        """Record a failed attempt: pending again at ``retry_at`` while attempts remain, else
        failed. ``retry_at=None`` fails it for good."""
        at = self._now(now)
        return await self._modify(
            job_id,
            lambda job: t.fail(job, worker_id=worker_id, now=at, error=error, retry_at=retry_at),
        )

    async def defer(
        self,
        job_id: str,
        worker_id: str,
        *,
        until: datetime,
        reason: str,
        now: datetime | None = None,
    ) -> Job:
        """Pending again at ``until``, the attempt given back (a quota, not a failure)."""
        at = self._now(now)
        return await self._modify(
            job_id,
            lambda job: t.defer(job, worker_id=worker_id, now=at, until=until, reason=reason),
        )

    async def release(self, job_id: str, worker_id: str, *, now: datetime | None = None) -> Job:
        """Give an unfinished job back (worker stopping): due now, the attempt given back."""
        at = self._now(now)
        return await self._modify(job_id, lambda job: t.release(job, worker_id=worker_id, now=at))

    async def await_approval(
        self,
        job_id: str,
        worker_id: str,
        *,
        reason: str = "waiting for approval",
        payload: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        now: datetime | None = None,
    ) -> Job:
        """Park the job until approved; ``payload`` (a draft) is merged into the job's."""
        at = self._now(now)
        return await self._modify(
            job_id,
            lambda job: t.await_approval(
                job,
                worker_id=worker_id,
                now=at,
                reason=reason,
                payload=payload or {},
                expires_at=expires_at,
            ),
        )

    async def approve(
        self,
        job_id: str,
        *,
        payload: dict[str, Any] | None = None,
        by: str | None = None,
        now: datetime | None = None,
    ) -> Job:
        """Approve a job awaiting approval: due now; ``payload`` replaces the job's if given."""
        at = self._now(now)
        return await self._modify(
            job_id, lambda job: t.approve(job, now=at, payload=payload, by=by)
        )

    async def reject(
        self, job_id: str, *, reason: str | None = None, now: datetime | None = None
    ) -> Job:
        """Reject a job awaiting approval: cancelled, with the reason as its error."""
        at = self._now(now)
        return await self._modify(job_id, lambda job: t.reject(job, now=at, reason=reason))

    async def cancel(
        self, job_id: str, *, reason: str | None = None, now: datetime | None = None
    ) -> Job:
        """Cancel a job that has not finished; a running one is stopped at its next renewal."""
        at = self._now(now)
        return await self._modify(job_id, lambda job: t.cancel(job, now=at, reason=reason))

    async def retry(self, job_id: str, *, now: datetime | None = None) -> Job:
        """A failed or cancelled job back to pending, due now, with its attempts reset."""
        at = self._now(now)
        return await self._modify(job_id, lambda job: t.retry(job, now=at))

    async def expire_approvals(
        self, *, to: JobState = JobState.CANCELLED, now: datetime | None = None
    ) -> list[Job]:
        """Cancel (or fail) every job whose approval expired; returns them."""
        at = self._now(now)
        waiting = await self.list_jobs(states=[JobState.AWAITING_APPROVAL], limit=None)
        expired = []
        for job in waiting:
            if job.approval_expires_at is None or job.approval_expires_at > at:
                continue
            try:
                expired.append(
                    await self._modify(job.id, lambda j: t.expire_approval(j, now=at, to=to))
                )
            except JobStateError:  # approved or cancelled meanwhile
                continue
        return expired
