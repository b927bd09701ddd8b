"""``/jobs``: list with filters, read, approve (with an edited caption), reject, cancel, retry;
admin and per-agent token scopes; 409 without a job store."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from carrier.agents import AgentManager
from carrier.jobs import Job, JobState, ManualClock, SQLiteJobStore
from tests.api.conftest import CHARACTER, bearer

T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
_KINDS = itertools.count()
DRAFT = {"caption": "fog came in at six.", "media": ["/srv/lib/fog.jpg"], "kind": "photo"}


@pytest.fixture
async def jobs(tmp_path: Path, manager: AgentManager) -> AsyncIterator[SQLiteJobStore]:
    async with SQLiteJobStore(path=tmp_path / "jobs.db", clock=ManualClock(T0)) as store:
        manager.services["jobs"] = store
        yield store


async def awaiting(jobs: SQLiteJobStore, agent_id: str, draft: dict[str, Any] | None) -> Job:
    """A job parked for approval, as a worker leaves it."""
    kind = f"instagram.post.{next(_KINDS)}"  # its own kind: the claim takes this job only
    job = await jobs.enqueue(kind, agent_id=agent_id, payload={"source": "plan"})
    [claimed] = await jobs.claim("w1", [kind], lease_s=60)
    assert claimed.id == job.id
    await jobs.start(job.id, "w1")
    payload = {"draft": draft} if draft is not None else {}
    return await jobs.await_approval(job.id, "w1", payload=payload)


async def agents(client: httpx.AsyncClient) -> tuple[str, str]:
    a = (await client.post("/agents", json=CHARACTER)).json()["id"]
    b = (await client.post("/agents", json={**CHARACTER, "name": "Other"})).json()["id"]
    return a, b


async def test_jobs_list_filters_and_read(client: httpx.AsyncClient, jobs: SQLiteJobStore) -> None:
    a, b = await agents(client)
    draft = await awaiting(jobs, a, DRAFT)
    other = await jobs.enqueue("digest", agent_id=b, payload={"n": 1})

    every = (await client.get("/jobs")).json()
    assert [j["id"] for j in every] == [other.id, draft.id]  # newest first
    waiting = await client.get("/jobs", params={"state": ["awaiting_approval", "failed"]})
    assert [j["id"] for j in waiting.json()] == [draft.id]
    assert [j["id"] for j in (await client.get(f"/jobs?agent_id={b}")).json()] == [other.id]
    assert [j["id"] for j in (await client.get("/jobs?kind=digest")).json()] == [other.id]
    assert len((await client.get("/jobs?limit=1")).json()) == 1
    bad = await client.get("/jobs?state=sleeping")
    assert bad.status_code == 422 and bad.json()["problems"][0]["path"] == "query.state.0"

    shown = await client.get(f"/jobs/{draft.id}")
    assert shown.status_code == 200
    body = shown.json()
    assert body["state"] == "awaiting_approval" and body["payload"]["draft"] == DRAFT
    assert body["history"][-1]["state"] == "awaiting_approval"
    assert "lease_owner" not in body
    missing = await client.get("/jobs/nope")
    assert missing.status_code == 404 and missing.json()["error"] == "job_not_found"


async def test_jobs_approve_with_an_edited_caption(
    client: httpx.AsyncClient, jobs: SQLiteJobStore
) -> None:
    a, _ = await agents(client)
    job = await awaiting(jobs, a, DRAFT)

    approved = await client.post(f"/jobs/{job.id}/approve", json={"caption": "fog, six sharp."})
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert body["state"] == "pending" and body["approved_at"] is not None
    assert body["payload"]["draft"] == {
        **DRAFT,
        "caption": "fog, six sharp.",
        "caption_by": "operator",
    }
    assert body["history"][-1]["note"] == "approved by api:admin with an edited payload"
    stored = await jobs.get(job.id)
    assert stored is not None and stored.approved and stored.payload["source"] == "plan"

    twice = await client.post(f"/jobs/{job.id}/approve")
    assert twice.status_code == 409 and "not awaiting approval" in twice.json()["message"]


async def test_jobs_approve_as_is_and_payload_replacement(
    client: httpx.AsyncClient, jobs: SQLiteJobStore
) -> None:
    a, _ = await agents(client)
    plain = await awaiting(jobs, a, DRAFT)
    ok = await client.post(f"/jobs/{plain.id}/approve")
    assert ok.status_code == 200 and ok.json()["payload"]["draft"] == DRAFT

    replaced = await awaiting(jobs, a, DRAFT)
    body = {"payload": {"draft": {**DRAFT, "media": []}}, "caption": "new"}
    ok = await client.post(f"/jobs/{replaced.id}/approve", json=body)
    assert ok.json()["payload"] == {
        "draft": {**DRAFT, "media": [], "caption": "new", "caption_by": "operator"}
    }

    bare = await awaiting(jobs, a, None)
    refused = await client.post(f"/jobs/{bare.id}/approve", json={"caption": "x"})
    assert refused.status_code == 422 and refused.json()["error"] == "no_draft"
    unknown = await client.post(f"/jobs/{bare.id}/approve", json={"captions": "typo"})
    assert unknown.status_code == 422
    assert (await jobs.get(bare.id) or bare).state is JobState.AWAITING_APPROVAL


async def test_jobs_reject_cancel_and_retry(
    client: httpx.AsyncClient, jobs: SQLiteJobStore
) -> None:
    a, _ = await agents(client)
    job = await awaiting(jobs, a, DRAFT)
    rejected = await client.post(f"/jobs/{job.id}/reject", json={"reason": "off-brand"})
    assert rejected.status_code == 200
    assert rejected.json()["state"] == "cancelled"
    assert rejected.json()["last_error"] == "rejected: off-brand"
    assert (await client.post(f"/jobs/{job.id}/reject")).status_code == 409

    retried = await client.post(f"/jobs/{job.id}/retry")
    assert retried.status_code == 200 and retried.json()["state"] == "pending"
    assert retried.json()["attempts"] == 0
    assert (await client.post(f"/jobs/{job.id}/retry")).status_code == 409

    cancelled = await client.post(f"/jobs/{job.id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert cancelled.json()["last_error"] == "cancelled: by api:admin"
    again = await client.post(f"/jobs/{job.id}/cancel", json={"reason": "twice"})
    assert again.status_code == 409 and again.json()["error"] == "job_state"
    assert (await client.post("/jobs/nope/cancel")).status_code == 404


async def test_jobs_agent_tokens_see_and_decide_their_own_agents_drafts_only(
    client: httpx.AsyncClient, jobs: SQLiteJobStore
) -> None:
    a, b = await agents(client)
    mine = await awaiting(jobs, a, DRAFT)
    theirs = await awaiting(jobs, b, DRAFT)
    created = await client.post("/tokens", json={"name": "a-token", "agent_id": a})
    token = bearer(created.json()["token"])

    listed = await client.get("/jobs", headers=token)
    assert [j["id"] for j in listed.json()] == [mine.id]
    assert (await client.get(f"/jobs?agent_id={b}", headers=token)).status_code == 403
    assert (await client.get(f"/jobs/{theirs.id}", headers=token)).status_code == 403
    assert (await client.post(f"/jobs/{theirs.id}/approve", headers=token)).status_code == 403
    assert (await client.post(f"/jobs/{theirs.id}/reject", headers=token)).status_code == 403
    swap = await client.post(
        f"/jobs/{mine.id}/approve", json={"payload": {"draft": {}}}, headers=token
    )
    assert swap.status_code == 403 and "only the admin" in swap.json()["message"]
    assert (await client.post(f"/jobs/{mine.id}/cancel", headers=token)).status_code == 403
    assert (await client.post(f"/jobs/{mine.id}/retry", headers=token)).status_code == 403

    approved = await client.post(f"/jobs/{mine.id}/approve", json={"caption": "ok"}, headers=token)
    assert approved.status_code == 200
    assert approved.json()["history"][-1]["note"].startswith("approved by api:a-token")
    assert (await jobs.get(theirs.id) or theirs).state is JobState.AWAITING_APPROVAL
    assert (await client.get("/jobs", headers={"Authorization": "Bearer wrong"})).status_code == 401


async def test_jobs_without_a_job_store_answer_409(client: httpx.AsyncClient) -> None:
    for method, path in [("GET", "/jobs"), ("GET", "/jobs/x"), ("POST", "/jobs/x/approve")]:
        response = await client.request(method, path)
        assert response.status_code == 409, (method, path)
        assert response.json()["error"] == "jobs_unavailable"
        assert "carrier run" in response.json()["message"]


async def test_a_job_shows_its_crashes_apart_from_its_attempts(
    client: httpx.AsyncClient, jobs: SQLiteJobStore
) -> None:
    a, _ = await agents(client)
    job = await jobs.enqueue("instagram.publish", agent_id=a, max_attempts=5)
    await jobs.claim("dead", ["instagram.publish"], lease_s=60)
    await jobs.checkpoint(job.id, "dead", progress={"container_id": "c1"}, committed=True)
    later = datetime(2025, 6, 2, 9, 5, tzinfo=UTC)  # the lease lapsed: another worker takes over
    [taken] = await jobs.claim("w2", ["instagram.publish"], lease_s=60, now=later)
    body = (await client.get(f"/jobs/{taken.id}")).json()
    assert (body["attempts"], body["max_attempts"]) == (1, 5)
    assert (body["crashes"], body["max_crashes"]) == (1, 10)
    assert body["progress"] == {"container_id": "c1"} and body["committed"] is True
