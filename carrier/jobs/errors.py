"""Errors of the job store, and the signals a handler raises to steer its job.

Errors follow Carrier's split: :class:`JobNotFound` and :class:`JobStateError` are the caller's
to fix (a wrong id, approving a job that is not awaiting approval); :class:`LeaseLost` is a
runtime condition a worker handles (another worker took the job over, or an operator cancelled it).
"""

from __future__ import annotations

from datetime import datetime

from carrier.errors import CarrierError, StoreError, UserError

__all__ = [
    "AwaitApproval",
    "Defer",
    "JobNotFound",
    "JobSignal",
    "JobStateError",
    "LeaseLost",
    "PermanentFailure",
]


class JobNotFound(UserError):
    """No job has this id."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id!r}; `carrier jobs list` shows the ids")


class JobStateError(UserError):
    """The job's state does not allow the change, e.g. approving a job that is running."""

    def __init__(self, job_id: str, state: str, wanted: str) -> None:
        self.job_id = job_id
        self.state = state
        super().__init__(f"job {job_id} is {state}; cannot {wanted}")


class LeaseLost(StoreError):
    """A worker wrote to a job it no longer holds: its lease was taken over or the job was
    cancelled. The worker drops the job; whatever it did stays done, its result is not recorded."""

    def __init__(self, job_id: str, worker_id: str, detail: str) -> None:
        self.job_id = job_id
        self.worker_id = worker_id
        super().__init__(f"worker {worker_id} no longer holds job {job_id}: {detail}")


class JobSignal(CarrierError):
    """Raised by a handler to end its attempt some other way than success or failure."""


class Defer(JobSignal):
    """Wait: put the job back to pending until ``until`` without consuming an attempt.

    For a quota or rate limit (``raise Defer(until=reset_at, reason="25 posts a day")``) or a
    resource not ready yet. Give ``until`` or ``delay_s``.
    """

    def __init__(
        self, *, reason: str, until: datetime | None = None, delay_s: float | None = None
    ) -> None:
        if (until is None) == (delay_s is None):
            raise ValueError("Defer needs exactly one of until= or delay_s=")
        self.reason = reason
        self.until = until
        self.delay_s = delay_s
        super().__init__(reason)


class AwaitApproval(JobSignal):
    """Park the job until a human approves it; the attempt is given back.

    ``payload`` (e.g. the drafted caption) is merged into the job's payload, where the operator
    sees and may edit it. After approval the handler runs again with ``job.approved`` true.
    ``expires_in_s`` overrides the worker's approval expiry.
    """

    def __init__(
        self,
        *,
        reason: str = "waiting for approval",
        payload: dict[str, object] | None = None,
        expires_in_s: float | None = None,
    ) -> None:
        self.reason = reason
        self.payload = dict(payload or {})
        self.expires_in_s = expires_in_s
        super().__init__(reason)


class PermanentFailure(JobSignal):
    """Fail the job now, without retrying (bad input that no retry can fix)."""
