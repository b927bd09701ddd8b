"""What a job handler is, and what it receives.

A handler is ``async def handler(job: Job, ctx: JobContext) -> dict | None``: it does the work and
returns a JSON result (or ``None``). To end its attempt otherwise it raises a signal from
:mod:`carrier.jobs.errors`: :class:`Defer` (wait, e.g. over a quota, without using an attempt),
:class:`AwaitApproval` (park for a human), :class:`PermanentFailure` (fail, no retry). Any other
exception fails the attempt, and the job is retried with backoff while attempts remain.

Handlers must be safe to run again: a worker that dies mid-job leaves it to another worker once
its lease expires (at-least-once). Use ``job.id`` or ``job.idempotency_key`` to make the outside
effect (a post) happen once, e.g. by recording it before and checking it on entry. Right before
an effect that must not happen twice, :meth:`JobContext.ensure_held` renews the lease and raises
:class:`~carrier.jobs.errors.LeaseLost` if another worker took the job over meanwhile; once the
effect happened, :meth:`JobContext.checkpoint` with ``committed=True`` records it, and the job
can no longer end ``failed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from carrier.jobs.clock import Clock
from carrier.jobs.model import Job

if TYPE_CHECKING:
    from carrier.jobs.base import JobStore

__all__ = ["Handler", "JobContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """Given to a handler with its job."""

    worker_id: str
    """The worker running the job."""
    store: JobStore
    """The job store, e.g. to enqueue follow-up jobs."""
    clock: Clock
    """The worker's clock: use ``ctx.now()`` rather than the system time, so tests control it."""
    services: Mapping[str, Any] = field(default_factory=dict)
    """Whatever the application handed the worker (an agent manager, a publisher, ...)."""
    job_id: str | None = None
    """The job being run (``None`` in a context made outside a worker)."""
    lease_s: float | None = None
    """The worker's lease length, which :meth:`ensure_held` renews for."""

    def now(self) -> datetime:
        return self.clock()

    def _job(self) -> str:
        if self.job_id is None or self.lease_s is None:
            raise RuntimeError("this JobContext was not made by a worker for a running job")
        return self.job_id

    async def ensure_held(self) -> None:
        """Renew the lease now: raises :class:`~carrier.jobs.errors.LeaseLost` if the job was
        taken over or cancelled. Call it right before an effect that must happen once: after it
        returns, no other worker can take the job over for a whole lease."""
        job_id = self._job()
        assert self.lease_s is not None
        await self.store.heartbeat(job_id, self.worker_id, lease_s=self.lease_s, now=self.now())

    async def checkpoint(self, progress: Mapping[str, Any], *, committed: bool = False) -> Job:
        """Record how far the job got (``progress`` is merged into ``job.progress``, which a
        worker taking the job over reads); ``committed``: its outside effect happened, so the
        job never ends ``failed`` (a later failure ends it succeeded, with a warning)."""
        return await self.store.checkpoint(
            self._job(), self.worker_id, progress=progress, committed=committed, now=self.now()
        )


Handler: TypeAlias = Callable[[Job, JobContext], Awaitable[Mapping[str, Any] | None]]
"""``async def handler(job, ctx) -> dict | None``."""
