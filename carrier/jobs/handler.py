"""What a job handler is, and what it receives.

A handler is ``async def handler(job: Job, ctx: JobContext) -> dict | None``: it does the work and
returns a JSON result (or ``None``). To end its attempt otherwise it raises a signal from
:mod:`carrier.jobs.errors`: :class:`Defer` (wait, e.g. over a quota, without using an attempt),
:class:`AwaitApproval` (park for a human), :class:`PermanentFailure` (fail, no retry). Any other
exception fails the attempt, and the job is retried with backoff while attempts remain.

Handlers must be safe to run again: a worker that dies mid-job leaves it to another worker once
its lease expires (at-least-once). Use ``job.id`` or ``job.idempotency_key`` to make the outside
effect (a post) happen once, e.g. by recording it before and checking it on entry.
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

    def now(self) -> datetime:
        return self.clock()


Handler: TypeAlias = Callable[[Job, JobContext], Awaitable[Mapping[str, Any] | None]]
"""``async def handler(job, ctx) -> dict | None``."""
