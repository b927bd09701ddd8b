"""Tool calls that wait for a human: ``approval: required`` parks the call as a job awaiting
approval; the admin approves or rejects it over the API; the job worker runs an approved call
through the same checks, at most once, and posts the outcome to the room; all of it audited.

The worker is the real one (``JobService`` over the SQLite job store, ``register_tool_jobs``),
drained in the test instead of polling."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from carrier.jobs import JobContext, JobService, JobState, Worker
from carrier.tools.approvals import TOOL_JOB_KIND, ToolJobs, register_tool_jobs
from carrier.types import MemoryKind
from tests.security._tools_world import World

BOOK = [{"id": "c1", "name": "book", "arguments": {"q": "table for 2"}}]


def worker_of(w: World) -> Worker:
    service = JobService(store=w.jobs)
    register_tool_jobs(service, w.manager)
    return service.worker


async def park_one(w: World, **fields: Any) -> dict[str, Any]:
    """Register ``book`` (approval required, open to everyone) and have ana ask for it."""
    spec = {"name": "book", "method": "POST", "trigger": "everyone", "approval": "required"}
    created = await w.register(**{**spec, **fields})
    assert created.status_code == 201, created.text
    return await w.say("book a table", calls=BOOK)


async def room_texts(w: World) -> list[str]:
    found = await w.manager.store.get_memories(
        agent_id=w.agent_id, kinds=[MemoryKind.MESSAGE], limit=100
    )
    return [m.content.text for m in reversed(found)]


async def test_tool_approval_parks_then_the_admin_approves_and_it_runs_once(world: World) -> None:
    w = world
    reply = await park_one(w)

    assert w.server.requests == []  # nothing ran
    [output] = w.tool_outputs()
    assert output.startswith("not run yet: a human must approve this call first")
    assert reply["replies"][-1]["text"].startswith("(Waiting for approval: book for ana, request ")
    [parked] = (await w.client.get("/tools/approvals")).json()
    assert (parked["tool"], parked["method"], parked["state"]) == (
        "book",
        "POST",
        "awaiting_approval",
    )
    assert parked["arguments"] == {"q": "table for 2"}
    assert parked["requested_by"] == {
        "platform": "api", "platform_id": "ana", "name": "ana", "is_admin": True
    }  # fmt: skip
    job = await w.jobs.get(parked["id"])
    assert job is not None and job.kind == TOOL_JOB_KIND
    assert job.approval_expires_at == job.created_at + timedelta(hours=24)
    [asked] = await w.events("tool.call")
    assert (asked.detail["status"], asked.target) == ("awaiting_approval", job.id)

    approved = await w.client.post(f"/tools/approvals/{job.id}/approve")
    assert approved.status_code == 200 and approved.json()["state"] == "pending"
    worker = worker_of(w)
    await worker.drain()

    assert [r["body"] for r in w.server.requests] == [{"q": "table for 2"}]
    done = await w.jobs.get(job.id)
    assert done is not None and done.state is JobState.SUCCEEDED
    assert done.result is not None and done.result["ok"] and done.result["output"]
    assert (await room_texts(w))[-1] == (
        'The request to use book for ana was approved and it ran:\n{"ran": "/ok", "n": 1}'
    )
    [approval] = await w.events("tool.approval")
    assert (approval.actor, approval.result, approval.target) == ("admin", "ok", job.id)
    assert approval.detail == {"tool": "book", "decision": "approved", "for": "api:ana (ana)"}
    statuses = [
        (e.detail["status"], e.detail.get("approved_by")) for e in await w.events("tool.call")
    ]
    assert statuses == [("awaiting_approval", None), ("ran", "admin")]

    await worker.drain()  # nothing more to do: the call ran once
    assert len(w.server.requests) == 1
    decided = (await w.client.get("/tools/approvals", params={"state": "succeeded"})).json()
    assert [d["result"]["ok"] for d in decided] == [True]
    again = await w.client.post(f"/tools/approvals/{job.id}/approve")
    assert again.status_code == 409


async def test_tool_approval_rejected_never_runs_and_the_room_is_told(world: World) -> None:
    w = world
    await park_one(w)
    [parked] = (await w.client.get("/tools/approvals")).json()

    rejected = await w.client.post(
        f"/tools/approvals/{parked['id']}/reject", json={"reason": "not today"}
    )
    assert rejected.status_code == 200 and rejected.json()["state"] == "cancelled"
    await worker_of(w).drain()

    assert w.server.requests == []
    assert (await room_texts(w))[-1] == "The request to use book for ana was not approved."
    [event] = await w.events("tool.approval")
    assert (event.actor, event.result, event.action) == ("admin", "refused", "reject")
    assert event.detail["decision"] == "rejected" and event.detail["reason"] == "not today"
    assert (await w.client.post(f"/tools/approvals/{parked['id']}/approve")).status_code == 409


async def test_tool_approval_is_for_the_admin(world: World) -> None:
    w = world
    await park_one(w)
    [parked] = (await w.client.get("/tools/approvals")).json()
    async with await w.helper_client() as helper:
        assert (await helper.get("/tools/approvals")).status_code == 403
        refused = await helper.post(f"/tools/approvals/{parked['id']}/approve")
        assert refused.status_code == 403
        # Nor through the jobs routes, which let an agent's token approve its drafts.
        for verb in ("approve", "reject"):
            refused = await helper.post(f"/jobs/{parked['id']}/{verb}")
            assert refused.status_code == 403, refused.text
            assert "only the admin token decides" in refused.json()["message"]
    job = await w.jobs.get(parked["id"])
    assert job is not None and job.state is JobState.AWAITING_APPROVAL
    assert (await w.client.get("/tools/approvals/no-such-job")).status_code == 404


async def test_tool_approval_checks_again_when_it_runs(world: World) -> None:
    """Approved after the tool was removed: nothing is sent, and the room hears why."""
    w = world
    await park_one(w)
    [parked] = (await w.client.get("/tools/approvals")).json()
    assert (await w.client.delete("/tools/book")).status_code == 204

    await w.client.post(f"/tools/approvals/{parked['id']}/approve")
    await worker_of(w).drain()

    assert w.server.requests == []
    assert (await room_texts(w))[-1] == (
        "The request to use book for ana was approved, but it failed: "
        "tool book is no longer registered"
    )
    statuses = [e.detail["status"] for e in await w.events("tool.call")]
    assert statuses == ["awaiting_approval", "not_allowed"]


async def test_tool_approval_call_interrupted_is_not_repeated(world: World) -> None:
    """A worker lost during the call leaves ``started``; whoever takes the job over reports
    it and does not call the endpoint again (it may have acted)."""
    w = world
    await park_one(w)
    [parked] = (await w.client.get("/tools/approvals")).json()
    approved = await w.jobs.approve(parked["id"], by="admin")
    taken_over = approved.model_copy(update={"progress": {"started": True}})
    ctx = JobContext(worker_id="w2", store=w.jobs, clock=w.jobs.clock)

    result = await ToolJobs(w.manager).call(taken_over, ctx)

    assert w.server.requests == []
    assert result["ok"] is False and "is not repeated" in result["error"]
    assert "interrupted while running" in (await room_texts(w))[-1]


async def test_tool_approval_expires(world: World) -> None:
    w = world
    await park_one(w, approval_hours=2)
    [parked] = (await w.client.get("/tools/approvals")).json()
    job = await w.jobs.get(parked["id"])
    assert job is not None and job.approval_expires_at == job.created_at + timedelta(hours=2)

    expired = await w.jobs.expire_approvals(now=job.created_at + timedelta(hours=3))

    assert [j.id for j in expired] == [job.id]
    assert (await w.client.get("/tools/approvals")).json() == []
    await worker_of(w).drain()
    assert w.server.requests == []


async def test_tool_approval_needs_a_job_store(world: World) -> None:
    w = world
    w.manager.services.pop("jobs")
    w.manager.runtime(w.agent_id).services.pop("jobs")
    await park_one(w)

    assert w.server.requests == []
    [output] = w.tool_outputs()
    assert "needs a human's approval, but this host keeps no approval queue" in output
    [event] = await w.events("tool.call")
    assert (event.result, event.detail["status"]) == ("refused", "no_approval_queue")
    assert (await w.client.get("/tools/approvals")).status_code == 409
