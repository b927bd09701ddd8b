"""The JobStore contract for crashes and committed effects, on every backend: a job taken over
from a lost worker counts a crash, not an attempt; a job past its crash budget fails, saying
why; a job whose effect was committed never ends ``failed``."""

from __future__ import annotations

import pytest

from carrier.jobs import JobState, JobStore, LeaseLost, ManualClock
from tests.jobs.conftest import LEASE, at, claimed


async def crash(jobs: JobStore, clock: ManualClock, worker: str) -> list[str]:
    """The holder dies: its lease lapses and ``worker`` claims; the ids it got."""
    clock.advance(LEASE)
    return [job.id for job in await jobs.claim(worker, ["k"], lease_s=LEASE)]


async def test_crashes_never_use_up_attempts(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs, "w0", max_attempts=1)
    await jobs.start(job.id, "w0")
    for i in range(1, 6):  # five workers die in turn while running it
        assert await crash(jobs, clock, f"w{i}") == [job.id]
        await jobs.start(job.id, f"w{i}")
    done = await jobs.succeed(job.id, "w5", result={"ok": True})
    assert (done.state, done.attempts, done.max_attempts, done.crashes) == (
        JobState.SUCCEEDED,
        1,
        1,
        5,
    )


async def test_a_failure_after_takeovers_counts_only_real_attempts(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, "w0", max_attempts=2)
    assert await crash(jobs, clock, "w1") == [job.id]
    retried = await jobs.fail(job.id, "w1", error="boom", retry_at=at(LEASE + 1))
    assert (retried.state, retried.attempts, retried.crashes) == (JobState.PENDING, 1, 1)
    clock.advance(1)
    [again] = await jobs.claim("w2", ["k"], lease_s=LEASE)
    assert (again.attempts, again.crashes) == (2, 1)


async def test_a_job_past_its_crash_budget_fails_saying_why(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, "w0", max_crashes=2)
    assert await crash(jobs, clock, "w1") == [job.id]
    assert await crash(jobs, clock, "w2") == [job.id]
    assert await crash(jobs, clock, "w3") == []  # the third crash is one too many
    failed = await jobs.get(job.id)
    assert failed is not None
    assert (failed.state, failed.crashes, failed.lease_owner) == (JobState.FAILED, 2, None)
    error = failed.last_error or ""
    assert "lost 3 times" in error and "max_crashes=2" in error and "w2" in error
    assert f"carrier jobs retry {job.id}" in error
    retried = await jobs.retry(job.id)  # a fresh budget
    assert (retried.state, retried.attempts, retried.crashes) == (JobState.PENDING, 0, 0)


async def test_checkpoints_are_merged_kept_across_takeovers_and_fenced(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, "w0")
    await jobs.checkpoint(job.id, "w0", progress={"container": "c1"})
    noted = await jobs.checkpoint(job.id, "w0", progress={"phase": "publishing"})
    assert noted.progress == {"container": "c1", "phase": "publishing"}
    assert not noted.committed and noted.history == job.history  # not a state change
    assert await crash(jobs, clock, "w1") == [job.id]
    with pytest.raises(LeaseLost):
        await jobs.checkpoint(job.id, "w0", progress={"phase": "stale"})
    taken = await jobs.get(job.id)
    assert taken is not None and taken.progress == {"container": "c1", "phase": "publishing"}


async def test_a_committed_job_never_fails(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs, max_attempts=1)
    committed = await jobs.checkpoint(job.id, "w1", progress={"media_id": "m1"}, committed=True)
    assert committed.committed
    again = await jobs.checkpoint(job.id, "w1", progress={"permalink": None})
    assert again.committed  # a job never becomes uncommitted
    done = await jobs.fail(job.id, "w1", error="recording the post failed", retry_at=None)
    assert (done.state, done.last_error) == (JobState.SUCCEEDED, "recording the post failed")
    assert done.result == {
        "media_id": "m1",
        "permalink": None,
        "warning": "recording the post failed",
    }
    assert "warning" in (done.history[-1].note or "")


async def test_a_committed_job_with_attempts_left_is_still_retried(jobs: JobStore) -> None:
    job = await claimed(jobs, max_attempts=3)
    await jobs.checkpoint(job.id, "w1", progress={"published": True}, committed=True)
    retried = await jobs.fail(job.id, "w1", error="store hiccup", retry_at=at(10))
    assert (retried.state, retried.committed) == (JobState.PENDING, True)


async def test_a_committed_job_past_its_crash_budget_succeeds_with_a_warning(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, "w0", max_crashes=0)
    await jobs.checkpoint(job.id, "w0", progress={"media_id": "m1"}, committed=True)
    assert await crash(jobs, clock, "w1") == []
    done = await jobs.get(job.id)
    assert done is not None and done.state is JobState.SUCCEEDED
    assert done.result is not None and done.result["media_id"] == "m1"
    assert "max_crashes=0" in done.result["warning"]
