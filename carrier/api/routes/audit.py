"""``GET /audit``: read the audit log (admin only), newest first, a page at a time.

The log is the host's (``manager.services["audit"]``, opened by ``carrier run`` and
``carrier serve``); a server without one answers 409 ``audit_unavailable``. Filters combine:
``agent_id``, ``actor`` (``admin``, ``token:<name>``, ``anonymous``, ``cli:<user>``,
``system``), ``kind`` (repeatable: any of them), ``since`` (inclusive) and ``until`` (exclusive).
The next, older page is ``?cursor=<next_cursor>`` with the same filters; ``next_cursor`` is null
on the last page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, StringConstraints

from carrier.api.auth import Principal, admin_only
from carrier.api.errors import ApiError, error_responses
from carrier.api.schemas import ID_PATTERN, ErrorBody, IsoDatetime, ProblemOut
from carrier.api.state import ApiState, api_state
from carrier.audit.base import AuditLog, NullAuditLog, audit_from
from carrier.audit.model import KIND_PATTERN, AuditEvent, AuditFilter

__all__ = ["AuditEventOut", "AuditPageOut", "router"]

router = APIRouter(tags=["audit"], responses=error_responses(401, 403, 429))

Kind = Annotated[str, StringConstraints(pattern=KIND_PATTERN, max_length=64)]


class AuditEventOut(BaseModel):
    """One entry of the audit log (see :class:`carrier.audit.AuditEvent`)."""

    id: str
    at: datetime
    kind: str
    """``api.call``, ``agent.start``, ``agent.stop``, ``memory.forget``, ``memory.prune``,
    ``instagram.publish``, ``instagram.approval``, ``safety.redaction``, ..."""
    actor: str | None
    agent_id: str | None
    action: str
    target: str | None
    result: str
    """``ok``, ``refused`` or ``failed``."""
    detail: dict[str, Any]

    @classmethod
    def of(cls, event: AuditEvent) -> AuditEventOut:
        return cls.model_validate(event.model_dump())


class AuditPageOut(BaseModel):
    items: list[AuditEventOut]
    """Newest first."""
    next_cursor: str | None = None
    """Pass as ``cursor`` (with the same filters) for the next, older page; null at the end."""


def _audit(state: ApiState) -> AuditLog:
    audit = audit_from(state.manager.services)
    if isinstance(audit, NullAuditLog):
        raise ApiError(
            409,
            "audit_unavailable",
            "this server keeps no audit log; `carrier run` and `carrier serve` open it",
        )
    return audit


@router.get(
    "/audit",
    response_model=AuditPageOut,
    summary="Read the audit log",
    responses={
        409: {"model": ErrorBody, "description": "This server keeps no audit log."},
        **error_responses(422),
    },
)
async def read_audit(
    state: Annotated[ApiState, Depends(api_state)],
    _: Annotated[Principal, Depends(admin_only)],
    agent_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    actor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    kind: Annotated[
        list[Kind] | None,
        Query(max_length=20, description="Any of these kinds (repeatable)."),
    ] = None,
    since: Annotated[
        IsoDatetime | None, Query(description="From this time on (inclusive).")
    ] = None,
    until: Annotated[IsoDatetime | None, Query(description="Before this time (exclusive).")] = None,
    cursor: Annotated[
        str | None, Query(max_length=400, description="A page's `next_cursor`.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditPageOut:
    """Who did what to which agent, newest first; admin only."""
    audit = _audit(state)
    where = AuditFilter(
        agent_id=agent_id, actor=actor, kinds=tuple(kind or ()), since=since, until=until
    )
    try:
        page = await audit.list_events(where, limit=limit, cursor=cursor)
    except ValueError as exc:
        raise ApiError(
            422,
            "invalid_cursor",
            str(exc),
            problems=[ProblemOut(path="query.cursor", message=str(exc))],
        ) from None
    return AuditPageOut(
        items=[AuditEventOut.of(e) for e in page.items], next_cursor=page.next_cursor
    )
