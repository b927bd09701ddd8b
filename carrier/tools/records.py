"""What tool calls leave in the audit log (``services["audit"]``; nothing without one).

``tool.call``
    every call a model made, whatever became of it: by the person it was made for
    (``discord:ana (8035...)``, ``api:alice (alice)``), with the tool, the outcome
    (``status``: ``ran``, ``failed``, ``not_allowed``, ``limited``, ``invalid``,
    ``awaiting_approval``, ``no_approval_queue``), the names of the arguments (never their
    values), the reason of a failure (never the endpoint's body) and, for an API call, the token
    that made the request (``via``).
``tool.approval``
    a parked call approved (recorded when the approved call runs, so an approval through any
    channel, the API, ``carrier jobs approve`` or the Discord buttons, is recorded alike, by
    whoever approved) or rejected (recorded by the API route or the Discord button that rejected
    it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carrier.audit.base import audit_from
from carrier.audit.context import current_actor
from carrier.audit.model import AuditKind, AuditResult
from carrier.tools.rules import Sender

__all__ = ["STATUS_RESULT", "record_approval", "record_call"]

STATUS_RESULT = {
    "ran": AuditResult.OK,
    "awaiting_approval": AuditResult.OK,
    "failed": AuditResult.FAILED,
    "not_allowed": AuditResult.REFUSED,
    "limited": AuditResult.REFUSED,
    "invalid": AuditResult.REFUSED,
    "no_approval_queue": AuditResult.REFUSED,
    "rejected": AuditResult.REFUSED,
}


async def record_call(
    services: Mapping[str, Any],
    *,
    tool: str,
    agent_id: str,
    sender: Sender,
    status: str,
    arguments: Mapping[str, Any] | None = None,
    error: str | None = None,
    job_id: str | None = None,
    approved_by: str | None = None,
) -> None:
    """One ``tool.call`` event."""
    detail: dict[str, Any] = {
        "tool": tool,
        "status": status,
        "arguments": sorted(str(k) for k in (arguments or {}))[:20],
        "platform": sender.platform,
    }
    via = current_actor()
    if via is not None:
        detail["via"] = via
    if error is not None:
        detail["error"] = error[:300]
    if job_id is not None:
        detail["job_id"] = job_id
    if approved_by is not None:
        detail["approved_by"] = approved_by
    await audit_from(services).record(
        AuditKind.TOOL_CALL,
        actor=sender.actor,
        agent_id=agent_id,
        action=tool,
        target=job_id,
        result=STATUS_RESULT.get(status, AuditResult.FAILED),
        detail=detail,
    )


async def record_approval(
    services: Mapping[str, Any],
    *,
    job_id: str,
    agent_id: str | None,
    tool: str,
    decision: str,
    by: str | None,
    sender: Sender | None = None,
    reason: str | None = None,
) -> None:
    """One ``tool.approval`` event: ``decision`` is ``approved`` or ``rejected``."""
    detail: dict[str, Any] = {"tool": tool, "decision": decision}
    if sender is not None:
        detail["for"] = sender.actor
    if reason:
        detail["reason"] = reason[:300]
    await audit_from(services).record(
        AuditKind.TOOL_APPROVAL,
        actor=by,
        agent_id=agent_id,
        action="approve" if decision == "approved" else "reject",
        target=job_id,
        result=AuditResult.OK if decision == "approved" else AuditResult.REFUSED,
        detail=detail,
    )
