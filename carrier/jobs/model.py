"""The Job record: a durable unit of scheduled or background work, and its states.

A job moves ``pending → claimed → running → succeeded | failed | cancelled``, with two detours
back to ``pending``: a retry after a failed attempt (``run_at`` pushed back by the backoff) and a
wait (the handler deferred it, e.g. over a quota). A handler may also park it in
``awaiting_approval`` until a human approves (back to ``pending``), rejects it or the approval
expires (``cancelled``)::

    pending ──claim──▶ claimed ──start──▶ running ──▶ succeeded
       ▲  ▲               │                 │ │ └──▶ failed (attempts used up, or permanent)
       │  └── retry/defer/release ──────────┘ │
       │                                      ▼
       └───────── approve ───────── awaiting_approval ──reject/expire──▶ cancelled

Any job not yet finished can be cancelled; a failed or cancelled one can be retried.

A worker renews the lease of a running job every third of the lease; a worker that dies stops
renewing, and once the lease expires another worker **takes the job over** (claimed again). That
is a crash, not an attempt: :attr:`Job.crashes` counts it against its own, larger budget
(:attr:`Job.max_crashes`), so a flaky host never uses up a job's attempts, while a job that kills
every worker that runs it (a poison job) still stops. A handler that records its outside effect as
done (:meth:`~carrier.jobs.handler.JobContext.checkpoint` with ``committed=True``, e.g. a post that
went live) makes the job one that never fails: a later failure ends it succeeded, with a warning.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from carrier.types import new_id, utcnow

__all__ = ["ACTIVE_STATES", "FINAL_STATES", "HISTORY_LIMIT", "Job", "JobEvent", "JobState"]

HISTORY_LIMIT = 20
"""How many state changes a job keeps in :attr:`Job.history` (the oldest are dropped)."""


class JobState(StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"
    """Waiting for ``run_at``; any worker that handles its kind may claim it then."""
    CLAIMED = "claimed"
    """Leased to a worker (``lease_owner``) that has not started it yet."""
    RUNNING = "running"
    """Its handler is running on ``lease_owner``; the worker renews the lease while it runs."""
    AWAITING_APPROVAL = "awaiting_approval"
    """Parked until a human approves (back to pending), rejects it, or the approval expires."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Attempts used up, a permanent error, or the lease expired during the last attempt."""
    CANCELLED = "cancelled"
    """Cancelled or rejected by an operator, or its approval expired."""


ACTIVE_STATES = frozenset({JobState.CLAIMED, JobState.RUNNING})
"""States in which a worker holds the job's lease."""
FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
"""States a job leaves only through an explicit retry."""


class JobEvent(BaseModel):
    """One state change, kept in :attr:`Job.history`."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    state: JobState
    """The state entered."""
    note: str | None = None
    """Why, in a few words: the error, the wait reason, who approved."""
    worker: str | None = None
    """The worker that made the change; ``None`` for an operator or the store itself."""


class Job(BaseModel):
    """A durable job. Build it through :meth:`JobStore.enqueue`; change it only through the store."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id)
    kind: str
    """The handler's name, e.g. ``instagram.publish``."""
    agent_id: str | None = None
    """The agent the job works for, if any."""
    payload: dict[str, Any] = Field(default_factory=dict)
    """The handler's input (JSON). A handler asking for approval may add its draft here; an
    operator may edit it when approving."""
    state: JobState = JobState.PENDING
    attempts: int = Field(default=0, ge=0)
    """Attempts started and counted: a wait, an approval request or a release on shutdown gives
    the attempt back, and so does a crash (the worker lost, see :attr:`crashes`)."""
    max_attempts: int = Field(default=3, ge=1)
    crashes: int = Field(default=0, ge=0)
    """Times the job was taken over because its worker was lost while holding it (the lease
    expired with no outcome recorded). Not attempts: a crash says nothing about the job."""
    max_crashes: int = Field(default=10, ge=0)
    """How many takeovers the job survives; the next one fails it (a poison job that crashes
    every worker that runs it must stop), unless its effect was committed."""
    run_at: datetime = Field(default_factory=utcnow)
    """When the job is due (first run, or the next retry or wait)."""
    lease_owner: str | None = None
    """The worker holding the job while claimed or running."""
    lease_expires_at: datetime | None = None
    """When another worker may take the job over if its owner has not renewed the lease."""
    last_error: str | None = None
    """The last failure, rejection or cancellation reason."""
    result: dict[str, Any] | None = None
    """What the handler returned (JSON), once succeeded."""
    progress: dict[str, Any] | None = None
    """What the handler recorded as done so far (JSON), kept across attempts and takeovers, so a
    worker taking the job over knows how far the last one got."""
    committed: bool = False
    """The job's outside effect happened (a post went live), as its handler recorded: from then
    on the job never fails; a failure ends it succeeded, with the error as a warning."""
    idempotency_key: str | None = None
    """Unique when set: enqueueing the same key again returns this job instead of a new one."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Time limit of one attempt; ``None`` takes the worker's default."""
    approved_at: datetime | None = None
    """When an operator approved it; handlers check it to publish instead of drafting again."""
    approval_expires_at: datetime | None = None
    """While awaiting approval: when it is cancelled unless approved."""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    history: list[JobEvent] = Field(default_factory=list)
    """The last :data:`HISTORY_LIMIT` state changes, oldest first."""

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def approved(self) -> bool:
        """True once an operator approved the job (a handler's cue to go ahead)."""
        return self.approved_at is not None

    def moved(
        self,
        state: JobState,
        *,
        now: datetime,
        note: str | None = None,
        worker: str | None = None,
        **changes: Any,
    ) -> Job:
        """A copy in ``state`` with ``changes`` applied and the change recorded in the history."""
        event = JobEvent(at=now, state=state, note=note, worker=worker)
        history = [*self.history, event][-HISTORY_LIMIT:]
        return self.model_copy(
            update={"state": state, "updated_at": now, "history": history, **changes}
        )
