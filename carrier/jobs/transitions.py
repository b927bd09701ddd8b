"""The job state machine as pure functions: ``Job`` in, changed ``Job`` out, or an error.

Stores apply them inside one atomic read-modify-write (a SQLite transaction, a MongoDB
compare-and-set), so the rules live here once and every backend enforces the same ones.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from carrier.jobs.errors import JobStateError, LeaseLost
from carrier.jobs.model import ACTIVE_STATES, FINAL_STATES, Job, JobState

__all__ = [
    "TAKEOVER_NOTE",
    "approve",
    "await_approval",
    "cancel",
    "checkpoint",
    "claim",
    "defer",
    "expire_approval",
    "fail",
    "heartbeat",
    "is_claimable",
    "reject",
    "release",
    "retry",
    "start",
    "succeed",
    "taken_over",
]

ERROR_LIMIT = 2000
"""Longest error text kept in a job."""

_FREE = {"lease_owner": None, "lease_expires_at": None}

TAKEOVER_NOTE = "taken over: the lease of its worker expired (a crash, not counted as an attempt)"
"""The history note of a takeover; the lost worker is the one named by the event before it."""


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"


def _held(job: Job, worker_id: str) -> None:
    """Raise unless ``worker_id`` holds the job. An expired lease nobody took over still counts:
    finishing late beats running twice."""
    if job.state not in ACTIVE_STATES:
        raise LeaseLost(job.id, worker_id, f"the job is {job.state}")
    if job.lease_owner != worker_id:
        raise LeaseLost(job.id, worker_id, f"it is leased to {job.lease_owner}")


def _refund(job: Job) -> int:
    return max(job.attempts - 1, 0)


def _give_up(job: Job, *, now: datetime, error: str, worker: str | None = None) -> Job:
    """The end of a job that cannot go on: failed, or, once its effect was committed (a post is
    live), succeeded with the error as a warning, since failing it would say the effect did not
    happen."""
    error = _clip(error)
    if job.committed:
        result = {**(job.progress or {}), **(job.result or {}), "warning": error}
        return job.moved(
            JobState.SUCCEEDED,
            now=now,
            note=_clip(f"succeeded with a warning (its effect was already done): {error}"),
            worker=worker,
            result=result,
            last_error=error,
            **_FREE,
        )
    return job.moved(JobState.FAILED, now=now, note=error, worker=worker, last_error=error, **_FREE)


def is_claimable(job: Job, now: datetime) -> bool:
    """Due and pending, or held under a lease that expired (its worker crashed or hung)."""
    if job.state is JobState.PENDING:
        return job.run_at <= now
    return (
        job.state in ACTIVE_STATES
        and job.lease_expires_at is not None
        and job.lease_expires_at <= now
    )


def claim(job: Job, *, worker_id: str, now: datetime, lease_s: float) -> Job:
    """Lease a claimable job to ``worker_id``.

    A pending job starts an attempt (counted). A job held under an expired lease is **taken
    over**: its worker was lost, which counts as a crash, not an attempt (the lost attempt is
    given back and this one takes its number). A job that has used up its crash budget fails
    instead (or, committed, succeeds with a warning): one that kills every worker must stop.
    """
    if not is_claimable(job, now):
        raise JobStateError(job.id, job.state, "claim it (not due, or leased)")
    expires = now + timedelta(seconds=lease_s)
    if job.state in ACTIVE_STATES:
        lost = job.lease_owner
        crashes = job.crashes + 1
        if job.crashes >= job.max_crashes:
            error = (
                f"its worker was lost {crashes} times while running it (the last: {lost}), "
                f"more than its crash budget (max_crashes={job.max_crashes}): the job may be "
                "crashing the worker; look for the cause in the workers' logs, then "
                f"`carrier jobs retry {job.id}`"
            )
            return _give_up(job, now=now, error=error)
        return job.moved(
            JobState.CLAIMED,
            now=now,
            note=TAKEOVER_NOTE,
            worker=worker_id,
            crashes=crashes,
            lease_owner=worker_id,
            lease_expires_at=expires,
        )
    return job.moved(
        JobState.CLAIMED,
        now=now,
        worker=worker_id,
        attempts=job.attempts + 1,
        lease_owner=worker_id,
        lease_expires_at=expires,
    )


def taken_over(job: Job) -> bool:
    """Whether a claimed job was taken over from a lost worker (rather than started afresh)."""
    return len(job.history) >= 2 and job.history[-2].state in ACTIVE_STATES


def start(job: Job, *, worker_id: str, now: datetime) -> Job:
    _held(job, worker_id)
    return job.moved(JobState.RUNNING, now=now, worker=worker_id)


def heartbeat(job: Job, *, worker_id: str, now: datetime, lease_s: float) -> Job:
    """Extend the lease; the state and history are untouched. (Stores renew with one
    conditional update on the job's id and owner instead; this is the rule they follow.)"""
    _held(job, worker_id)
    expires = now + timedelta(seconds=lease_s)
    return job.model_copy(update={"lease_expires_at": expires, "updated_at": now})


def checkpoint(
    job: Job, *, worker_id: str, now: datetime, progress: dict[str, Any], committed: bool
) -> Job:
    """Merge ``progress`` into the job's; ``committed`` marks its outside effect as done (for
    good: a job never becomes uncommitted)."""
    _held(job, worker_id)
    return job.model_copy(
        update={
            "progress": {**(job.progress or {}), **progress},
            "committed": job.committed or committed,
            "updated_at": now,
        }
    )


def succeed(job: Job, *, worker_id: str, now: datetime, result: dict[str, Any] | None) -> Job:
    _held(job, worker_id)
    return job.moved(JobState.SUCCEEDED, now=now, worker=worker_id, result=result, **_FREE)


def fail(job: Job, *, worker_id: str, now: datetime, error: str, retry_at: datetime | None) -> Job:
    """Back to pending at ``retry_at`` while attempts remain; failed when they are used up or
    ``retry_at`` is ``None`` (a permanent failure), or succeeded with a warning if committed."""
    _held(job, worker_id)
    error = _clip(error)
    if retry_at is not None and job.attempts < job.max_attempts:
        note = f"attempt {job.attempts}/{job.max_attempts} failed: {error}"
        return job.moved(
            JobState.PENDING,
            now=now,
            note=_clip(note),
            worker=worker_id,
            run_at=retry_at,
            last_error=error,
            **_FREE,
        )
    return _give_up(job, now=now, error=error, worker=worker_id)


def defer(job: Job, *, worker_id: str, now: datetime, until: datetime, reason: str) -> Job:
    """Wait until ``until`` without consuming the attempt."""
    _held(job, worker_id)
    return job.moved(
        JobState.PENDING,
        now=now,
        note=_clip(f"waiting until {until.isoformat()}: {reason}"),
        worker=worker_id,
        attempts=_refund(job),
        run_at=until,
        **_FREE,
    )


def release(job: Job, *, worker_id: str, now: datetime) -> Job:
    """Give the job back unfinished (worker shutting down): due now, attempt refunded."""
    _held(job, worker_id)
    return job.moved(
        JobState.PENDING,
        now=now,
        note="released by a stopping worker",
        worker=worker_id,
        attempts=_refund(job),
        run_at=now,
        **_FREE,
    )


def await_approval(
    job: Job,
    *,
    worker_id: str,
    now: datetime,
    reason: str,
    payload: dict[str, Any],
    expires_at: datetime | None,
) -> Job:
    """Park the job for a human, with ``payload`` merged in; the attempt is given back."""
    _held(job, worker_id)
    return job.moved(
        JobState.AWAITING_APPROVAL,
        now=now,
        note=_clip(reason),
        worker=worker_id,
        attempts=_refund(job),
        payload={**job.payload, **payload},
        approval_expires_at=expires_at,
        **_FREE,
    )


def _awaiting(job: Job, wanted: str) -> None:
    if job.state is not JobState.AWAITING_APPROVAL:
        raise JobStateError(job.id, job.state, wanted)


def approve(job: Job, *, now: datetime, payload: dict[str, Any] | None, by: str | None) -> Job:
    """Approved: due now, with ``payload`` (when given) replacing the job's payload."""
    _awaiting(job, "approve it (it is not awaiting approval)")
    note = f"approved by {by}" if by else "approved"
    return job.moved(
        JobState.PENDING,
        now=now,
        note=note + (" with an edited payload" if payload is not None else ""),
        run_at=now,
        approved_at=now,
        approval_expires_at=None,
        payload=job.payload if payload is None else dict(payload),
    )


def reject(job: Job, *, now: datetime, reason: str | None) -> Job:
    _awaiting(job, "reject it (it is not awaiting approval)")
    error = _clip(f"rejected: {reason}" if reason else "rejected")
    return job.moved(
        JobState.CANCELLED, now=now, note=error, last_error=error, approval_expires_at=None
    )


def expire_approval(job: Job, *, now: datetime, to: JobState) -> Job:
    """Cancel (or fail) a job whose approval did not come in time."""
    _awaiting(job, "expire its approval (it is not awaiting approval)")
    if job.approval_expires_at is None or job.approval_expires_at > now:
        raise JobStateError(job.id, job.state, "expire its approval yet")
    if to not in (JobState.CANCELLED, JobState.FAILED):
        raise ValueError(f"an expired approval goes to cancelled or failed, not {to}")
    error = f"approval expired at {job.approval_expires_at.isoformat()}"
    return job.moved(to, now=now, note=error, last_error=error)


def cancel(job: Job, *, now: datetime, reason: str | None) -> Job:
    """Cancel a job that has not finished. A running job's worker finds out at its next lease
    renewal and stops the handler."""
    if job.state in FINAL_STATES:
        raise JobStateError(job.id, job.state, "cancel it (it has already finished)")
    error = _clip(f"cancelled: {reason}" if reason else "cancelled")
    return job.moved(JobState.CANCELLED, now=now, note=error, last_error=error, **_FREE)


def retry(job: Job, *, now: datetime) -> Job:
    """A failed or cancelled job back to pending, due now, with fresh attempts and crash budget
    (its recorded progress stays, for the handler to resume from)."""
    if job.state not in (JobState.FAILED, JobState.CANCELLED):
        raise JobStateError(job.id, job.state, "retry it (only failed or cancelled jobs)")
    return job.moved(
        JobState.PENDING,
        now=now,
        note="retried",
        attempts=0,
        crashes=0,
        run_at=now,
        result=None,
        approval_expires_at=None,
        **_FREE,
    )
