"""``/jobs``: list and read durable jobs; approve (with an edited caption), reject, cancel, retry.

The job store is the host's (``manager.services["jobs"]``, set by ``carrier run``); a server
without one answers 409 ``jobs_unavailable``. The admin may do everything. A per-agent token
sees its own agent's jobs and may approve or reject its drafts; cancel and retry need the admin
token.

A draft waiting for approval (``state: awaiting_approval``) carries what it would post under
``payload.draft`` (for Instagram: ``caption``, ``media``, ``kind``, ``dry_run``);
``POST /jobs/{id}/approve`` with ``{"caption": "..."}`` approves it with that caption instead;
``GET /jobs/{id}/media/{n}`` serves its n-th image, so the console can show what will be posted.
``GET /jobs/schedules`` lists the recurring schedules (a posting plan's) with their next runs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from datetime import datetime
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from carrier.api.auth import Principal, admin_only, principal
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ID_PATTERN, ErrorBody
from carrier.api.state import ApiState, api_state
from carrier.jobs.base import JobStore
from carrier.jobs.errors import JobNotFound, JobStateError
from carrier.jobs.model import Job, JobState
from carrier.jobs.schedule import Schedule
from carrier.tools.approvals import TOOL_JOB_KIND

__all__ = ["ApproveIn", "JobEventOut", "JobOut", "ReasonIn", "ScheduleOut", "router"]

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


class ScheduleOut(BaseModel):
    """A recurring (or one-off) schedule and when it runs next."""

    name: str
    kind: str
    agent_id: str | None
    enabled: bool
    finished: bool
    """A one-off schedule whose time has come."""
    describe: str
    """The spec in words: ``cron '0 9 * * mon-fri' (Europe/Lisbon) + up to 20m``."""
    spec: dict[str, Any]
    next_at: datetime | None
    """The occurrence queued as a job last (it is pending until then)."""
    upcoming: list[datetime]
    """The occurrences after ``next_at``, earliest case: a random jitter or interval is taken
    at its lower bound, so these are the soonest they can be."""

    @classmethod
    def of(cls, schedule: Schedule, *, count: int = 3) -> ScheduleOut:
        upcoming: list[datetime] = []
        previous = schedule.next_at
        earliest = _Earliest()
        while previous is not None and len(upcoming) < count and not schedule.finished:
            following = schedule.spec.following(previous, previous, earliest)
            if following is None:
                break
            upcoming.append(following)
            previous = following
        return cls(
            name=schedule.name,
            kind=schedule.kind,
            agent_id=schedule.agent_id,
            enabled=schedule.enabled,
            finished=schedule.finished,
            describe=schedule.spec.describe(),
            spec=schedule.spec.model_dump(mode="json"),
            next_at=schedule.next_at,
            upcoming=upcoming,
        )


class _Earliest(random.Random):
    """A random source that draws the lower bound: the soonest a jittered slot can come."""

    def uniform(self, a: float, b: float) -> float:
        return min(a, b)


MEDIA_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
"""What ``GET /jobs/{id}/media/{n}`` serves (images; a video is named, not previewed)."""


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
    "/schedules",
    response_model=list[ScheduleOut],
    summary="List schedules (posting plans) with their next runs",
    responses=error_responses(422),
)
async def list_schedules(
    state: State,
    who: Who,
    agent_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    kind: Annotated[str | None, Query(max_length=100)] = None,
) -> list[ScheduleOut]:
    """By name. A per-agent token sees its own agent's schedules only."""
    store = _store(state)
    if not who.admin:
        if agent_id is not None and agent_id != who.agent_id:
            raise _forbidden(who, agent_id)
        agent_id = who.agent_id
    schedules = await store.list_schedules()
    return [
        ScheduleOut.of(s)
        for s in sorted(schedules, key=lambda s: s.name)
        if (agent_id is None or s.agent_id == agent_id) and (kind is None or s.kind == kind)
    ]


@router.get(
    "/{job_id}", response_model=JobOut, summary="Read a job", responses=error_responses(404, 422)
)
async def get_job(job_id: JobId, state: State, who: Who) -> JobOut:
    return JobOut.of(await _job(_store(state), job_id, who))


@router.get(
    "/{job_id}/media/{index}",
    summary="An image of the job's draft, as it would be posted",
    response_class=FileResponse,
    responses={
        200: {"content": {t: {} for t in sorted(set(MEDIA_TYPES.values()))}},
        **error_responses(404, 422),
    },
)
async def job_media(
    job_id: JobId,
    index: Annotated[int, Path(ge=0, le=19, description="Which file of the draft (from 0).")],
    state: State,
    who: Who,
) -> FileResponse:
    """The ``index``-th file of ``payload.draft.media`` (an image): 404 ``no_media`` when the
    draft has none there, the file is gone, or it is not an image (a reel's video)."""
    job = await _job(_store(state), job_id, who)
    draft = job.payload.get("draft")
    media = draft.get("media") if isinstance(draft, dict) else None
    if not isinstance(media, list) or index >= len(media) or not isinstance(media[index], str):
        raise ApiError(404, "no_media", f"job {job_id} has no draft media number {index}")
    path = FilePath(media[index])
    media_type = MEDIA_TYPES.get(path.suffix.lower())
    if media_type is None:
        raise ApiError(
            404, "no_media", f"{path.name} is not an image the console can show (a video?)"
        )
    if not await asyncio.to_thread(path.is_file):
        raise ApiError(404, "no_media", f"{path.name} is gone from the server (moved or deleted)")
    return FileResponse(path, media_type=media_type, headers={"Cache-Control": "no-store"})


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
