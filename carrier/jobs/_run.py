"""Running one claimed job: start it, call its handler under its time limit, record the outcome.

The :class:`~carrier.jobs.worker.Worker` adds claiming, leases and the loop on top.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from carrier.jobs.backoff import Backoff
from carrier.jobs.base import JobStore
from carrier.jobs.clock import Clock
from carrier.jobs.errors import AwaitApproval, Defer, LeaseLost, PermanentFailure
from carrier.jobs.handler import Handler, JobContext
from carrier.jobs.model import Job, JobState

__all__ = ["JobRunner", "WorkerStats"]

logger = logging.getLogger("carrier.jobs.worker")


@dataclass(slots=True)
class WorkerStats:
    """What a worker has done since it was made."""

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    """Attempts that failed with attempts left (the job went back to pending)."""
    failed: int = 0
    """Jobs that failed for good."""
    deferred: int = 0
    awaiting_approval: int = 0
    released: int = 0
    lost: int = 0
    """Jobs taken over by another worker or cancelled while this one ran them."""
    taken_over: int = 0
    """Jobs this worker took over from a lost worker (their lease had expired)."""
    errors: int = 0
    """The worker's own failures (the store unreachable, ...), not its jobs'."""


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class JobRunner(ABC):
    """Runs claimed jobs. Never raises out of :meth:`execute` but ``CancelledError``."""

    def __init__(
        self,
        *,
        store: JobStore,
        worker_id: str,
        clock: Clock,
        default_timeout_s: float | None,
        backoff: Backoff,
        approval_ttl_s: float | None,
        services: Mapping[str, Any],
        lease_s: float,
    ) -> None:
        self.store = store
        self.lease_s = lease_s
        self.worker_id = worker_id
        self.clock = clock
        self.default_timeout_s = default_timeout_s
        self.backoff = backoff
        self.approval_ttl_s = approval_ttl_s
        self.services = services
        self.stats = WorkerStats()
        self._handling: set[str] = set()
        """Jobs whose handler is running (the only ones a worker cancels)."""
        self._lost: set[str] = set()
        """Jobs whose lease was lost: their handler was cancelled, nothing is recorded."""
        self._releasing: set[str] = set()
        """Jobs cancelled by a stopping worker, to release afterwards."""
        self._abandon = False
        """Set by a stopping worker whose grace ran out: release jobs instead of starting them."""

    @abstractmethod
    def _handler(self, kind: str) -> Handler | None: ...

    async def execute(self, job: Job) -> None:
        """Run one job this worker has claimed, and record how it ended."""
        try:
            await self._execute(job)
        except LeaseLost as exc:
            self.stats.lost += 1
            logger.warning("%s; its outcome is not recorded", exc)
        except Exception:
            # The store failed: the lease expires and another attempt follows.
            self.stats.errors += 1
            logger.exception("worker %s: recording job %s failed", self.worker_id, job.id)
        finally:
            self._handling.discard(job.id)
            self._lost.discard(job.id)

    async def _execute(self, job: Job) -> None:
        job = await self.store.start(job.id, self.worker_id, now=self.clock())
        handler = self._handler(job.kind)
        if self._abandon or handler is None:  # stopping, or the kind was unregistered
            await self.store.release(job.id, self.worker_id, now=self.clock())
            self.stats.released += 1
            return
        ctx = JobContext(
            worker_id=self.worker_id,
            store=self.store,
            clock=self.clock,
            services=self.services,
            job_id=job.id,
            lease_s=self.lease_s,
        )
        limit = job.timeout_s if job.timeout_s is not None else self.default_timeout_s
        timeout = asyncio.timeout(limit)
        result: Mapping[str, Any] | None = None
        outcome: Exception | None = None
        self._handling.add(job.id)
        try:
            async with timeout:
                result = await handler(job, ctx)
        except asyncio.CancelledError:
            if job.id in self._lost or job.id in self._releasing:
                return  # cancelled on purpose by this worker; nothing to record
            raise
        except Exception as exc:
            outcome = exc
        finally:
            # From here on a lost lease shows up as LeaseLost on the write, not as a cancel.
            self._handling.discard(job.id)
        if isinstance(outcome, LeaseLost):
            raise outcome  # the handler found the job taken over (ensure_held): record nothing
        if outcome is None:
            await self._succeed(job, result)
        elif isinstance(outcome, Defer):
            await self._defer(job, outcome)
        elif isinstance(outcome, AwaitApproval):
            await self._await_approval(job, outcome)
        elif isinstance(outcome, PermanentFailure):
            await self._fail(job, _describe(outcome), retry=False)
        elif isinstance(outcome, TimeoutError) and timeout.expired():
            await self._fail(job, f"timed out after {limit:g} s", retry=True)
        else:
            logger.warning("job %s (%s) raised", job.id, job.kind, exc_info=outcome)
            await self._fail(job, _describe(outcome), retry=True)

    async def _succeed(self, job: Job, result: Mapping[str, Any] | None) -> None:
        try:
            if result is not None and not isinstance(result, Mapping):
                raise TypeError(f"handler returned {type(result).__name__}, not a dict or None")
            data = to_jsonable_python(dict(result)) if result is not None else None
        except (TypeError, PydanticSerializationError) as exc:
            # The work is done (it may have posted): retrying would repeat it.
            await self._fail(job, f"unusable result: {exc}", retry=False)
            return
        await self.store.succeed(job.id, self.worker_id, result=data, now=self.clock())
        self.stats.succeeded += 1
        logger.debug("job %s (%s) succeeded", job.id, job.kind)

    async def _fail(self, job: Job, error: str, *, retry: bool) -> None:
        now = self.clock()
        retry_at = now + timedelta(seconds=self.backoff.delay(job.attempts)) if retry else None
        stored = await self.store.fail(
            job.id, self.worker_id, error=error, retry_at=retry_at, now=now
        )
        if stored.state is JobState.SUCCEEDED:  # committed: its effect is done, never failed
            self.stats.succeeded += 1
            logger.warning("job %s (%s) succeeded with a warning: %s", job.id, job.kind, error)
        elif stored.state is JobState.PENDING:
            self.stats.retried += 1
            logger.info(
                "job %s (%s) attempt %d/%d failed, retry at %s: %s",
                job.id,
                job.kind,
                job.attempts,
                job.max_attempts,
                stored.run_at.isoformat(),
                error,
            )
        else:
            self.stats.failed += 1
            logger.warning("job %s (%s) failed: %s", job.id, job.kind, error)

    async def _defer(self, job: Job, signal: Defer) -> None:
        now = self.clock()
        until = signal.until or now + timedelta(seconds=signal.delay_s or 0.0)
        await self.store.defer(job.id, self.worker_id, until=until, reason=signal.reason, now=now)
        self.stats.deferred += 1
        logger.info("job %s (%s) waits until %s: %s", job.id, job.kind, until, signal.reason)

    async def _await_approval(self, job: Job, signal: AwaitApproval) -> None:
        now = self.clock()
        ttl = signal.expires_in_s if signal.expires_in_s is not None else self.approval_ttl_s
        await self.store.await_approval(
            job.id,
            self.worker_id,
            reason=signal.reason,
            payload=to_jsonable_python(signal.payload),
            expires_at=now + timedelta(seconds=ttl) if ttl is not None else None,
            now=now,
        )
        self.stats.awaiting_approval += 1
        logger.info("job %s (%s) awaits approval: %s", job.id, job.kind, signal.reason)
