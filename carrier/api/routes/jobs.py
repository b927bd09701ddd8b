"""``/jobs``: list and read durable jobs; approve (with an edited caption), reject, cancel, retry.

The job store is the host's (``manager.services["jobs"]``, set by ``carrier run``); a server
without one answers 409 ``jobs_unavailable``. The admin may do everything. A per-agent token
sees its own agent's jobs and may approve or reject its drafts; cancel and retry need the admin
token.

A draft waiting for approval (``state: awaiting_approval``) carries what it would post under
``payload.draft`` (for Instagram: ``caption``, ``media``, ``kind``, ``dry_run``);
``POST /jobs/{id}/approve`` with ``{"caption": "..."}`` approves it with that caption instead.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from carrier.api.auth import Principal, admin_only, principal
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ID_PATTERN, ErrorBody
from carrier.api.state import ApiState, api_state
from carrier.jobs.base import JobStore
from carrier.jobs.errors import JobNotFound, JobStateError
from carrier.jobs.model import Job, JobState
from carrier.tools.approvals import TOOL_JOB_KIND

__all__ = ["ApproveIn", "JobEventOut", "JobOut", "ReasonIn", "router"]

_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorBody,
        "description": "The job is not in a state that allows this, or this process runs no "
        "job store (`jobs_unavailable`: jobs run under `carrier run`).",
    }
}

router = APIRouter(
    prefix="/jobs", tags=["jobs"], responses={**error_responses(401, 403, 429), **_UNAVAILABLE}
)

State = Annotated[ApiState, Depends(api_state)]
Who = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin_only)]
JobId = Annotated[str, Path(pattern=ID_PATTERN, description="The job's id.")]


class JobEventOut(BaseModel):
    at: datetime
    state: JobState
    note: str | None = None
    worker: str | None = None


class JobOut(BaseModel):
    """A job as the store holds it."""

    id: str
    kind: str
    agent_id: str | None
    state: JobState
    payload: dict[str, Any]
    """The handler's input; a draft awaiting approval is under ``payload.draft``."""
    result: dict[str, Any] | None
    last_error: str | None
    attempts: int
    """Attempts started and counted (a crash is not one, see ``crashes``)."""
    max_attempts: int
    crashes: int
    """Times the job was taken over from a worker that was lost while running it."""
    max_crashes: int
    """Takeovers the job survives; one more fails it (a job that crashes every worker)."""
    progress: dict[str, Any] | None
    """What the handler recorded as done so far (e.g. a post's container and media id)."""
    committed: bool
    """The job's outside effect happened (a post is live): it never ends ``failed``."""
    run_at: datetime
    approved_at: datetime | None
    approval_expires_at: datetime | None
    idempotency_key: str | None
    created_at: datetime
    updated_at: datetime
    history: list[JobEventOut]

    @classmethod
    def of(cls, job: Job) -> JobOut:
        return cls.model_validate(job.model_dump(exclude={"lease_owner", "lease_expires_at"}))


class ApproveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    caption: str | None = Field(default=None, max_length=2200)
    """Approve with this caption instead of the drafted one (sets ``payload.draft.caption``)."""
    payload: dict[str, Any] | None = None
    """Admin only: replace the whole payload (the caption, if given, is applied on top)."""


class ReasonIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)


def _store(state: ApiState) -> JobStore:
    store = state.manager.services.get("jobs")
    if not isinstance(store, JobStore):
        raise ApiError(
            409,
            "jobs_unavailable",
            "this server runs no job store: jobs (scheduled posts, approvals) are served by "
            "`carrier run`",
        )
    return store


def _forbidden(who: Principal, agent_id: str | None) -> ApiError:
    return ApiError(
        403,
        "forbidden",
        f"token {who.name!r} is scoped to agent {who.agent_id!r}, not {agent_id!r}",
    )


async def _job(store: JobStore, job_id: str, who: Principal) -> Job:
    job = await store.get(job_id)
    if job is None:
        raise ApiError(404, "job_not_found", f"no job with id {job_id!r}; GET /jobs lists them")
    if not who.admin and job.agent_id != who.agent_id:
        raise _forbidden(who, job.agent_id)
    return job


def _decider(who: Principal, job: Job) -> None:
    """A parked tool call is decided by the admin only: an agent's token is trusted to talk to
    its agent, not to let the agent act on the world (its drafts it may approve)."""
    if job.kind == TOOL_JOB_KIND and not who.admin:
        raise ApiError(
            403,
            "forbidden",
            f"job {job.id} is a tool call awaiting approval: only the admin token decides those "
            "(POST /tools/approvals/{id}/approve or /reject)",
        )


async def _change(change: Awaitable[Job]) -> JobOut:
    try:
        job = await change
    except JobNotFound as exc:
        raise ApiError(404, "job_not_found", str(exc)) from None
    except JobStateError as exc:
        raise ApiError(409, "job_state", str(exc)) from None
    return JobOut.of(job)


@router.get(
    "",
    response_model=list[JobOut],
    summary="List jobs, newest first",
    responses=error_responses(422),
)
async def list_jobs(
    state: State,
    who: Who,
    job_state: Annotated[
        list[JobState] | None, Query(alias="state", description="Any of these states.")
    ] = None,
    kind: Annotated[str | None, Query(max_length=100)] = None,
    agent_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[JobOut]:
    """Filter by ``state`` (repeatable: ``?state=awaiting_approval&state=pending``), ``kind``
    (``instagram.post``) and ``agent_id``. A per-agent token sees its own agent's jobs only."""
    store = _store(state)
    if not who.admin:
        if agent_id is not None and agent_id != who.agent_id:
            raise _forbidden(who, agent_id)
        agent_id = who.agent_id
    jobs = await store.list_jobs(states=job_state, kind=kind, agent_id=agent_id, limit=limit)
    return [JobOut.of(job) for job in jobs]


@router.get(
    "/{job_id}", response_model=JobOut, summary="Read a job", responses=error_responses(404, 422)
)
async def get_job(job_id: JobId, state: State, who: Who) -> JobOut:
    return JobOut.of(await _job(_store(state), job_id, who))


@router.post(
    "/{job_id}/approve",
    response_model=JobOut,
    summary="Approve a job awaiting approval, optionally with an edited caption",
    responses=error_responses(400, 404, 413, 415, 422),
)
async def approve_job(
    job_id: JobId,
    state: State,
    who: Who,
    body: Annotated[ApproveIn | None, Body()] = None,
) -> JobOut:
    """The job runs again at once with the (edited) payload and goes ahead (an Instagram draft
    is published). 409 when it is not awaiting approval."""
    store = _store(state)
    job = await _job(store, job_id, who)
    _decider(who, job)
    payload: dict[str, Any] | None = None
    if body is not None and body.payload is not None:
        if not who.admin:
            raise ApiError(
                403, "forbidden", "only the admin token may replace a job's payload; send caption"
            )
        payload = dict(body.payload)
    if body is not None and body.caption is not None:
        payload = dict(payload if payload is not None else job.payload)
        draft = payload.get("draft")
        if not isinstance(draft, dict):
            raise ApiError(
                422,
                "no_draft",
                f"job {job_id} ({job.kind}) has no draft whose caption could be edited",
            )
        payload["draft"] = {**draft, "caption": body.caption, "caption_by": "operator"}
    return await _change(store.approve(job_id, payload=payload, by=f"api:{who.name}"))


@router.post(
    "/{job_id}/reject",
    response_model=JobOut,
    summary="Reject a job awaiting approval (it is cancelled)",
    responses=error_responses(400, 404, 413, 415, 422),
)
async def reject_job(
    job_id: JobId, state: State, who: Who, body: Annotated[ReasonIn | None, Body()] = None
) -> JobOut:
    store = _store(state)
    _decider(who, await _job(store, job_id, who))
    reason = body.reason if body is not None else None
    return await _change(store.reject(job_id, reason=reason or f"by api:{who.name}"))


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    summary="Cancel a job that has not finished",
    responses=error_responses(400, 404, 413, 415, 422),
)
async def cancel_job(
    job_id: JobId, state: State, who: Admin, body: Annotated[ReasonIn | None, Body()] = None
) -> JobOut:
    store = _store(state)
    _decider(who, await _job(store, job_id, who))
    reason = body.reason if body is not None else None
    return await _change(store.cancel(job_id, reason=reason or f"by api:{who.name}"))


@router.post(
    "/{job_id}/retry",
    response_model=JobOut,
    summary="Run a failed or cancelled job again",
    responses=error_responses(404, 422),
)
async def retry_job(job_id: JobId, state: State, who: Admin) -> JobOut:
    store = _store(state)
    await _job(store, job_id, who)
    return await _change(store.retry(job_id))
