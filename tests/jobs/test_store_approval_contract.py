"""The JobStore contract for approvals and operator actions: every backend passes it."""

from __future__ import annotations

import pytest

from carrier.jobs import JobNotFound, JobState, JobStateError, JobStore, ManualClock
from carrier.jobs.model import HISTORY_LIMIT
from tests.jobs.conftest import LEASE, at, claimed


# -- approval ----------------------------------------------------------------------------------
async def test_approval_approve_with_an_edited_payload(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs, payload={"media": "m1"})
    waiting = await jobs.await_approval(
        job.id, "w1", reason="caption drafted", payload={"caption": "draft"}, expires_at=at(600)
    )
    assert waiting.state is JobState.AWAITING_APPROVAL
    assert waiting.payload == {"media": "m1", "caption": "draft"}
    assert (waiting.attempts, waiting.approval_expires_at, waiting.approved) == (0, at(600), False)
    assert await jobs.claim("w1", ["k"], lease_s=LEASE) == []
    clock.advance(60)
    approved = await jobs.approve(job.id, payload={"media": "m1", "caption": "final"}, by="ann")
    assert approved.state is JobState.PENDING
    assert approved.payload == {"media": "m1", "caption": "final"}
    assert (approved.approved_at, approved.run_at, approved.approval_expires_at) == (
        at(60),
        at(60),
        None,
    )
    assert approved.approved
    assert "ann" in (approved.history[-1].note or "")
    [again] = await jobs.claim("w1", ["k"], lease_s=LEASE)
    assert again.approved and again.payload["caption"] == "final"


async def test_approve_without_payload_keeps_the_draft(jobs: JobStore) -> None:
    job = await claimed(jobs)
    await jobs.await_approval(job.id, "w1", payload={"caption": "draft"})
    approved = await jobs.approve(job.id)
    assert approved.payload == {"caption": "draft"}


async def test_reject_cancels_with_the_reason(jobs: JobStore) -> None:
    job = await claimed(jobs)
    await jobs.await_approval(job.id, "w1")
    rejected = await jobs.reject(job.id, reason="off brand")
    assert rejected.state is JobState.CANCELLED
    assert rejected.last_error == "rejected: off brand"


async def test_approve_or_reject_a_job_not_awaiting_approval_is_refused(jobs: JobStore) -> None:
    job = await jobs.enqueue("k")
    with pytest.raises(JobStateError, match="pending"):
        await jobs.approve(job.id)
    with pytest.raises(JobStateError):
        await jobs.reject(job.id)


async def test_expired_approvals_are_cancelled_or_failed(
    jobs: JobStore, clock: ManualClock
) -> None:
    soon, late, forever = [await claimed(jobs) for _ in range(3)]
    await jobs.await_approval(soon.id, "w1", expires_at=at(100))
    await jobs.await_approval(late.id, "w1", expires_at=at(1000))
    await jobs.await_approval(forever.id, "w1", expires_at=None)
    clock.advance(99)
    assert await jobs.expire_approvals() == []
    clock.advance(1)
    [expired] = await jobs.expire_approvals()
    assert (expired.id, expired.state) == (soon.id, JobState.CANCELLED)
    assert "approval expired" in (expired.last_error or "")
    clock.advance(10_000)
    [failed] = await jobs.expire_approvals(to=JobState.FAILED)
    assert (failed.id, failed.state) == (late.id, JobState.FAILED)
    stored = await jobs.get(forever.id)
    assert stored is not None and stored.state is JobState.AWAITING_APPROVAL


# -- operator actions --------------------------------------------------------------------------
async def test_cancel_any_unfinished_job_but_not_a_finished_one(jobs: JobStore) -> None:
    pending = await jobs.enqueue("k", run_at=at(60))
    cancelled = await jobs.cancel(pending.id, reason="not needed")
    assert (cancelled.state, cancelled.last_error) == (JobState.CANCELLED, "cancelled: not needed")
    running = await claimed(jobs)
    await jobs.start(running.id, "w1")
    stopped = await jobs.cancel(running.id)
    assert (stopped.state, stopped.lease_owner) == (JobState.CANCELLED, None)
    with pytest.raises(JobStateError, match="already finished"):
        await jobs.cancel(running.id)


async def test_retry_a_failed_or_cancelled_job(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs, max_attempts=1)
    await jobs.fail(job.id, "w1", error="boom", retry_at=at(1))
    clock.advance(50)
    retried = await jobs.retry(job.id)
    assert (retried.state, retried.attempts, retried.run_at) == (JobState.PENDING, 0, at(50))
    assert len(await jobs.claim("w1", ["k"], lease_s=LEASE)) == 1
    with pytest.raises(JobStateError, match="only failed or cancelled"):
        await jobs.retry(job.id)
    await jobs.cancel(job.id)
    assert (await jobs.retry(job.id)).state is JobState.PENDING


async def test_unknown_job_ids_raise_job_not_found(jobs: JobStore) -> None:
    for call in (
        jobs.cancel("nope"),
        jobs.retry("nope"),
        jobs.approve("nope"),
        jobs.start("nope", "w"),
    ):
        with pytest.raises(JobNotFound, match="nope"):
            await call


async def test_history_keeps_the_latest_changes(jobs: JobStore) -> None:
    job = await jobs.enqueue("k", max_attempts=1)
    for _ in range(HISTORY_LIMIT):
        await jobs.cancel(job.id)
        await jobs.retry(job.id)
    stored = await jobs.get(job.id)
    assert stored is not None
    assert len(stored.history) == HISTORY_LIMIT
    assert stored.history[-1].note == "retried"
