"""What scheduled posting leaves in the audit log: each publish (or its final failure) and each
approved draft.

Written by the job handlers (:mod:`clients.instagram.jobs`) into the host's audit log
(``manager.services["audit"]``; nothing when the host keeps none):

``instagram.publish``
    by ``system`` (the job worker), when a post went out (``ok``: media id, permalink) or failed
    for good (``failed``: the platform's message, redacted): a permanent failure, or the last
    attempt's error.
``instagram.approval``
    by whoever approved the draft (``api:<token>``, ``discord:<user> (<id>)``, ``cli``), when the
    approved draft goes ahead: recorded by the handler, so an approval through any channel is
    recorded the same way. A rejection made through the API is its ``api.call`` event; one made
    with the Discord buttons is an ``instagram.approval`` event with result ``refused``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carrier.audit.base import AuditLog, audit_from
from carrier.audit.model import AuditKind, AuditResult
from carrier.jobs.model import Job, JobState
from clients.instagram.drafts import Draft

__all__ = ["approved_by", "record_approval", "record_publish"]

SYSTEM = "system"


def approved_by(job: Job) -> str | None:
    """Who approved the job last, from its history (``approved by <who>``), if it says."""
    for event in reversed(job.history):
        note = event.note or ""
        if event.state is JobState.PENDING and note.startswith("approved by "):
            return note.removeprefix("approved by ").removesuffix(" with an edited payload")
    return None


async def record_approval(services: Mapping[str, Any], job: Job, draft: Draft) -> None:
    """An approved draft goes ahead."""
    audit: AuditLog = audit_from(services)
    await audit.record(
        AuditKind.INSTAGRAM_APPROVAL,
        actor=approved_by(job),
        agent_id=job.agent_id,
        action="approve",
        target=job.id,
        detail={
            "decision": "approved",
            "caption_by": draft.caption_by,
            "kind": draft.kind.value,
            "dry_run": draft.dry_run,
        },
    )


async def record_publish(
    services: Mapping[str, Any],
    job: Job,
    draft: Draft | None,
    *,
    result: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """A publish went out (``result``) or failed for good (``error``)."""
    detail: dict[str, Any] = {
        "post_job_id": job.payload.get("post_job_id"),
        "attempt": job.attempts,
    }
    if draft is not None:
        detail.update(kind=draft.kind.value, dry_run=draft.dry_run, source=draft.source)
    if result is not None:
        detail.update(
            media_id=result.get("media_id"),
            permalink=result.get("permalink"),
            media=result.get("media"),
        )
    if error is not None:
        detail["error"] = error
    await audit_from(services).record(
        AuditKind.INSTAGRAM_PUBLISH,
        actor=SYSTEM,
        agent_id=job.agent_id,
        action="publish",
        target=job.id,
        result=AuditResult.OK if error is None else AuditResult.FAILED,
        detail=detail,
    )
