"""``/tools``: HTTP tools the models can call, and the calls that wait for approval (admin only).

Header values are references to environment variables the operator allows
(``CARRIER_TOOL_ENV``), so a registered tool never stores or returns a secret; a spec the
operator's rules refuse (a secret not allowed for its host, a loopback, private or link-local
address not in ``CARRIER_TOOL_INTERNAL_HOSTS``) is a 422 naming each field.

A call of a tool with ``approval: required`` waits as a ``tool.call`` job:
``GET /tools/approvals`` lists them, ``POST /tools/approvals/{id}/approve`` lets it run (on the
worker of ``carrier run``, which posts the result to the room), ``.../reject`` drops it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.convertors import Convertor, register_url_convertor

from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ID_PATTERN, ErrorBody, ProblemOut
from carrier.api.state import ApiState, api_state
from carrier.jobs.base import JobStore
from carrier.jobs.errors import JobNotFound, JobStateError
from carrier.jobs.model import Job, JobState
from carrier.tool_registry import ToolExists, ToolRefused
from carrier.tools import ToolSpec
from carrier.tools.approvals import NOTICE_JOB_KIND, TOOL_JOB_KIND, sender_of
from carrier.tools.records import record_approval
from carrier.tools.spec import TOOL_NAME

__all__ = ["ApprovalOut", "router"]


class _ToolName(Convertor[str]):
    """A tool's name in a path: never ``approvals``, so ``/tools/approvals`` is only the list of
    parked calls (and ``DELETE /tools/{name}`` does not claim that path too)."""

    regex = r"(?!approvals$)[A-Za-z][A-Za-z0-9_-]{0,63}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("tool_name", _ToolName())

router = APIRouter(prefix="/tools", tags=["tools"], responses=error_responses(401, 403, 429))

State = Annotated[ApiState, Depends(api_state)]
Admin = Annotated[Principal, Depends(admin_only)]
JobId = Annotated[str, Path(pattern=ID_PATTERN, description="The parked call's job id.")]
_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorBody,
        "description": "The call is not awaiting approval, or this process keeps no job store.",
    }
}


@router.post(
    "",
    status_code=201,
    response_model=ToolSpec,
    summary="Register an HTTP tool",
    responses=error_responses(400, 409, 413, 422),
)
async def add_tool(spec: ToolSpec, state: State, _: Admin) -> ToolSpec:
    """The tool becomes an action that running agents (all, or those in ``agent_ids``) can call
    through tool calling, for the people its ``trigger`` names; its output enters the prompt
    marked as untrusted data."""
    try:
        await state.manager.tools.add(spec)
    except ToolExists as exc:
        raise ApiError(409, "tool_exists", str(exc)) from None
    except ToolRefused as exc:
        raise ApiError(
            422,
            "tool_not_allowed",
            str(exc),
            problems=[ProblemOut(path=f"body.{path}", message=m) for path, m in exc.problems],
        ) from None
    await state.manager.refresh_tools()
    return spec


@router.get("", response_model=list[ToolSpec], summary="List registered tools")
async def list_tools(state: State, _: Admin) -> list[ToolSpec]:
    return sorted((await state.manager.tools.all()).values(), key=lambda s: s.name)


# -- calls waiting for approval (before /{name}, which they would otherwise match) ------------
class ApprovalOut(BaseModel):
    """A tool call parked for a human."""

    id: str
    """The job's id (``carrier jobs approve ID`` works too)."""
    agent_id: str | None
    tool: str
    method: str | None
    host: str | None
    arguments: dict[str, Any]
    """What the model asked the tool for (as the redactor left it)."""
    requested_by: dict[str, Any]
    """The person the call was made for: platform, platform id, name, whether a room admin."""
    room: dict[str, Any]
    state: JobState
    created_at: datetime
    expires_at: datetime | None
    approved_at: datetime | None
    result: dict[str, Any] | None
    """Once run: ``ok``, the output (cut) or the error, and whether it was posted back."""
    last_error: str | None

    @classmethod
    def of(cls, job: Job) -> ApprovalOut:
        payload = job.payload
        arguments = payload.get("arguments")
        room = payload.get("room")
        return cls(
            id=job.id,
            agent_id=job.agent_id,
            tool=str(payload.get("tool") or ""),
            method=payload.get("method"),
            host=payload.get("host"),
            arguments=dict(arguments) if isinstance(arguments, dict) else {},
            requested_by=sender_of(job).to_json(),
            room=dict(room) if isinstance(room, dict) else {},
            state=job.state,
            created_at=job.created_at,
            expires_at=job.approval_expires_at,
            approved_at=job.approved_at,
            result=job.result,
            last_error=job.last_error,
        )


class RejectIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)


def _actor(who: Principal) -> str:
    """The caller as the audit log names it (these routes are the admin's)."""
    return "admin" if who.admin else f"token:{who.name}"


def _jobs(state: ApiState) -> JobStore:
    store = state.manager.services.get("jobs")
    if not isinstance(store, JobStore):
        raise ApiError(
            409,
            "jobs_unavailable",
            "this server runs no job store, so no tool call waits here (approvals are kept by "
            "`carrier run` and `carrier serve`)",
        )
    return store


async def _parked(store: JobStore, job_id: str) -> Job:
    job = await store.get(job_id)
    if job is None or job.kind != TOOL_JOB_KIND:
        raise ApiError(
            404, "approval_not_found", f"no tool call {job_id!r}; GET /tools/approvals lists them"
        )
    return job


@router.get(
    "/approvals",
    response_model=list[ApprovalOut],
    summary="List tool calls waiting for approval (or decided)",
    responses={**error_responses(422), **_UNAVAILABLE},
)
async def list_approvals(
    state: State,
    _: Admin,
    job_state: Annotated[
        list[JobState] | None,
        Query(alias="state", description="Any of these states (default: awaiting_approval)."),
    ] = None,
    agent_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[ApprovalOut]:
    jobs = await _jobs(state).list_jobs(
        states=job_state or [JobState.AWAITING_APPROVAL],
        kind=TOOL_JOB_KIND,
        agent_id=agent_id,
        limit=limit,
    )
    return [ApprovalOut.of(job) for job in jobs]


@router.get(
    "/approvals/{job_id}",
    response_model=ApprovalOut,
    summary="Read a parked tool call",
    responses={**error_responses(404, 422), **_UNAVAILABLE},
)
async def get_approval(job_id: JobId, state: State, _: Admin) -> ApprovalOut:
    return ApprovalOut.of(await _parked(_jobs(state), job_id))


@router.post(
    "/approvals/{job_id}/approve",
    response_model=ApprovalOut,
    summary="Approve a parked tool call: it runs, and its result is posted to the room",
    responses={**error_responses(404, 413, 415, 422), **_UNAVAILABLE},
)
async def approve_call(job_id: JobId, state: State, who: Admin) -> ApprovalOut:
    """The call runs on the worker of ``carrier run`` (the process that runs the agent), through
    the same checks as in a turn; the approval is audited (``tool.approval``) when it runs."""
    store = _jobs(state)
    await _parked(store, job_id)
    try:
        job = await store.approve(job_id, by=_actor(who))
    except JobStateError as exc:
        raise ApiError(409, "job_state", str(exc)) from None
    return ApprovalOut.of(job)


@router.post(
    "/approvals/{job_id}/reject",
    response_model=ApprovalOut,
    summary="Reject a parked tool call: it never runs, and the room is told",
    responses={**error_responses(400, 404, 413, 415, 422), **_UNAVAILABLE},
)
async def reject_call(
    job_id: JobId, state: State, who: Admin, body: Annotated[RejectIn | None, Body()] = None
) -> ApprovalOut:
    store = _jobs(state)
    parked = await _parked(store, job_id)
    reason = body.reason if body is not None and body.reason else None
    try:
        job = await store.reject(job_id, reason=reason or f"by {_actor(who)}")
    except (JobStateError, JobNotFound) as exc:
        raise ApiError(409, "job_state", str(exc)) from None
    await record_approval(
        state.manager.services,
        job_id=job.id,
        agent_id=job.agent_id,
        tool=str(parked.payload.get("tool") or ""),
        decision="rejected",
        by=_actor(who),
        sender=sender_of(parked),
        reason=reason,
    )
    await store.enqueue(
        NOTICE_JOB_KIND,
        agent_id=job.agent_id,
        payload={"job_id": job.id, "event": "rejected"},
        idempotency_key=f"tool-notice-rejected:{job.id}",
    )
    return ApprovalOut.of(job)


@router.delete(
    "/{name:tool_name}",
    status_code=204,
    response_class=Response,
    summary="Remove a tool",
    responses=error_responses(404, 422),
)
async def delete_tool(
    name: Annotated[str, Path(pattern=TOOL_NAME)], state: State, _: Admin
) -> Response:
    if not await state.manager.tools.remove(name):
        raise ApiError(404, "tool_not_found", f"no tool named {name!r}")
    await state.manager.refresh_tools()
    return Response(status_code=204)
