"""Instagram in the audit log: an approved draft (``instagram.approval``, by whoever approved it),
its publish on the loopback fake Graph API (``instagram.publish`` with the media id), a publish
that fails for good, a rejection through the API (its ``api.call``) and one with the Discord
approval buttons (``instagram.approval``, refused, by the member who clicked).

The world is the posting-plan tests' own (a real aioftp server, the fake Graph API, a JobService
on a manual clock, the jobs API through httpx) and the Discord approval tests' (real
INTERACTION_CREATE clicks from the fake Discord); the host's audit log is of each backend."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from carrier.audit import AuditFilter, AuditKind, AuditLog
from carrier.jobs import JobState, SQLiteJobStore
from clients.discord.fake.payloads import ALL_PERMISSIONS
from tests.clients.discord.conftest import Harness
from tests.clients.discord.test_approval import (  # noqa: F401 - fixtures
    click,
    draft_job,
    image,
    jobs,
    post_draft,
)
from tests.clients.instagram.conftest import (  # noqa: F401 - fixtures
    fake_graph,
    ftp_root,
    ftp_server,
    make_publisher,
    store,
)
from tests.clients.instagram.test_plan_flow import (  # noqa: F401 - fixtures
    CRON_9AM,
    POST_JOB_KIND,
    PUBLISH_JOB_KIND,
    World,
    clock,
    make_world,
)

APPROVAL = {**CRON_9AM, "approval": "required"}


async def kinds(audit: AuditLog, *names: str) -> list[Any]:
    return (await audit.list_events(AuditFilter(kinds=names))).items


async def test_audit_instagram_approval_and_publish(
    audit: AuditLog,
    make_world: Callable[..., Any],  # noqa: F811 - the fixture
) -> None:
    w: World = await make_world(APPROVAL)
    w.manager.services["audit"] = audit  # the host's log (carrier run puts it there first)
    await w.run(advance=timedelta(hours=1))
    post = await w.first(POST_JOB_KIND)

    approved = await w.http.post(f"/jobs/{post.id}/approve", json={"caption": "fog, six."})
    assert approved.status_code == 200, approved.text
    await w.run()
    [published] = w.graph.published

    [approval] = await kinds(audit, AuditKind.INSTAGRAM_APPROVAL)
    assert (approval.actor, approval.agent_id, approval.target) == (
        "api:admin",
        w.agent_id,
        post.id,
    )
    assert approval.result == "ok" and approval.detail["decision"] == "approved"
    assert approval.detail["caption_by"] == "operator"
    [publish] = await kinds(audit, AuditKind.INSTAGRAM_PUBLISH)
    publish_job = await w.only(PUBLISH_JOB_KIND)
    assert (publish.actor, publish.agent_id, publish.target) == (
        "system",
        w.agent_id,
        publish_job.id,
    )
    assert publish.result == "ok" and publish.detail["media_id"] == published["id"]
    assert publish.detail["permalink"] == published["permalink"]
    assert publish.detail["post_job_id"] == post.id
    [call] = await kinds(audit, AuditKind.API_CALL)
    assert (call.actor, call.action, call.detail["status"]) == (
        "admin",
        "POST /jobs/{job_id}/approve",
        200,
    )


async def test_audit_instagram_publish_that_fails_for_good(
    audit: AuditLog,
    make_world: Callable[..., Any],  # noqa: F811 - the fixture
) -> None:
    w: World = await make_world({"schedule": {"interval": "1h"}})
    w.manager.services["audit"] = audit
    w.graph.next_status = ("ERROR", "Error: the media is not allowed (2207026)")
    await w.run(advance=timedelta(hours=1))

    [failed] = await kinds(audit, AuditKind.INSTAGRAM_PUBLISH)
    assert failed.result == "failed" and failed.actor == "system"
    assert failed.agent_id == w.agent_id and "2207026" in failed.detail["error"]
    assert w.graph.publish_calls == 0


async def test_audit_instagram_rejection_through_the_api(
    audit: AuditLog,
    make_world: Callable[..., Any],  # noqa: F811 - the fixture
) -> None:
    w: World = await make_world(APPROVAL)
    w.manager.services["audit"] = audit
    await w.run(advance=timedelta(hours=1))
    draft = await w.first(POST_JOB_KIND)
    rejected = await w.http.post(f"/jobs/{draft.id}/reject", json={"reason": "off"})
    assert rejected.status_code == 200
    await w.run(advance=timedelta(hours=1))

    [call] = await kinds(audit, AuditKind.API_CALL)
    assert (call.actor, call.action, call.target) == (
        "admin",
        "POST /jobs/{job_id}/reject",
        f"/jobs/{draft.id}/reject",
    )
    assert await kinds(audit, AuditKind.INSTAGRAM_APPROVAL, AuditKind.INSTAGRAM_PUBLISH) == []


async def test_audit_instagram_rejection_with_the_discord_buttons(
    audit: AuditLog,
    harness: Harness,
    jobs: SQLiteJobStore,  # noqa: F811 - the fixture
    image: Path,  # noqa: F811 - the fixture
) -> None:
    h = harness
    h.runtime.services["audit"] = audit
    await h.start({"approvalChannel": "#showcase"})
    job = await draft_job(jobs, h.runtime.agent_id, image, "fog at six")
    message = await post_draft(h, job)

    await click(h, h.ana, message, f"carrier:reject:{job.id}", ALL_PERMISSIONS)

    assert (await jobs.get(job.id) or job).state is JobState.CANCELLED
    [decision] = await kinds(audit, AuditKind.INSTAGRAM_APPROVAL)
    assert decision.actor == f"discord:ana ({h.ana['id']})"
    assert (decision.agent_id, decision.target) == (h.runtime.agent_id, job.id)
    assert decision.result == "refused" and decision.detail["decision"] == "rejected"
