"""The JobStore contract for jobs: every backend in ``conftest.JOB_STORE_FACTORIES`` passes it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from carrier.jobs import (
    JobNotFound,
    JobState,
    JobStore,
    LeaseLost,
    ManualClock,
)
from tests.jobs.conftest import LEASE, T0, JobStoreFactory, at, claimed


# -- enqueue, get, list ------------------------------------------------------------------------
async def test_enqueue_defaults_and_get(jobs: JobStore) -> None:
    job = await jobs.enqueue("digest", payload={"n": 1}, agent_id="a1")
    assert job.state is JobState.PENDING
    assert (job.attempts, job.max_attempts) == (0, 3)
    assert job.run_at == job.created_at == job.updated_at == T0
    assert [e.state for e in job.history] == [JobState.PENDING]
    assert await jobs.get(job.id) == job
    assert await jobs.get("missing") is None


async def test_enqueue_same_idempotency_key_returns_the_existing_job(jobs: JobStore) -> None:
    first = await jobs.enqueue("post", payload={"v": 1}, idempotency_key="post:1")
    again = await jobs.enqueue("post", payload={"v": 2}, idempotency_key="post:1")
    other = await jobs.enqueue("post", idempotency_key="post:2")
    assert again == first
    assert other.id != first.id
    assert len(await jobs.list_jobs()) == 2


async def test_enqueue_racing_one_key_from_two_connections_makes_one_job(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        made = await asyncio.gather(
            *(store.enqueue("post", idempotency_key="k") for store in (a, b) for _ in range(5))
        )
        assert len({job.id for job in made}) == 1
        assert len(await a.list_jobs()) == 1


async def test_list_filters_newest_first(jobs: JobStore, clock: ManualClock) -> None:
    one = await jobs.enqueue("a", agent_id="x")
    clock.advance(1)
    two = await jobs.enqueue("b", agent_id="x")
    clock.advance(1)
    three = await jobs.enqueue("a", agent_id="y")
    await jobs.cancel(three.id)
    assert [j.id for j in await jobs.list_jobs()] == [three.id, two.id, one.id]
    assert [j.id for j in await jobs.list_jobs(kind="a")] == [three.id, one.id]
    assert [j.id for j in await jobs.list_jobs(agent_id="x")] == [two.id, one.id]
    assert [j.id for j in await jobs.list_jobs(states=[JobState.CANCELLED])] == [three.id]
    assert await jobs.list_jobs(states=[]) == []
    assert [j.id for j in await jobs.list_jobs(limit=1)] == [three.id]
    assert len(await jobs.list_jobs(limit=None)) == 3


async def test_data_survives_reopening(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as store:
        job = await store.enqueue("k", payload={"caption": "héllo", "tags": [1, 2]})
    async with job_store_factory.new_store(clock) as store:
        assert await store.get(job.id) == job


# -- claim -------------------------------------------------------------------------------------
async def test_claim_takes_due_jobs_of_its_kinds_oldest_due_first(
    jobs: JobStore, clock: ManualClock
) -> None:
    late = await jobs.enqueue("k", run_at=at(-10))
    early = await jobs.enqueue("k", run_at=at(-20))
    await jobs.enqueue("k", run_at=at(60))  # not due
    await jobs.enqueue("other")  # another kind
    got = await jobs.claim("w1", ["k"], lease_s=LEASE, limit=10)
    assert [j.id for j in got] == [early.id, late.id]
    for job in got:
        assert job.state is JobState.CLAIMED
        assert job.attempts == 1
        assert job.lease_owner == "w1"
        assert job.lease_expires_at == at(LEASE)
    assert await jobs.claim("w2", ["k"], lease_s=LEASE, limit=10) == []
    assert await jobs.claim("w2", [], lease_s=LEASE) == []
    assert await jobs.claim("w2", ["k"], lease_s=LEASE, limit=0) == []


async def test_claim_respects_limit(jobs: JobStore) -> None:
    for _ in range(5):
        await jobs.enqueue("k")
    assert len(await jobs.claim("w1", ["k"], lease_s=LEASE, limit=2)) == 2
    assert len(await jobs.claim("w2", ["k"], lease_s=LEASE, limit=10)) == 3


async def test_expired_lease_is_taken_over_as_a_crash_not_an_attempt(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, "dead")
    await jobs.start(job.id, "dead")
    clock.advance(LEASE - 1)
    assert await jobs.claim("w2", ["k"], lease_s=LEASE) == []
    clock.advance(1)
    [taken] = await jobs.claim("w2", ["k"], lease_s=LEASE)
    assert (taken.id, taken.lease_owner, taken.attempts, taken.crashes) == (job.id, "w2", 1, 1)
    assert taken.lease_expires_at == at(2 * LEASE)
    lost, takeover = taken.history[-2:]
    assert (lost.state, lost.worker) == (JobState.RUNNING, "dead")  # who was lost
    assert (takeover.state, takeover.worker) == (JobState.CLAIMED, "w2")
    assert "crash" in (takeover.note or "")
    with pytest.raises(LeaseLost):
        await jobs.succeed(job.id, "dead", result={})


async def test_claim_max_active_counts_live_leases_of_every_worker(
    jobs: JobStore, clock: ManualClock
) -> None:
    for _ in range(4):
        await jobs.enqueue("k")
    assert len(await jobs.claim("w1", ["k"], lease_s=LEASE, limit=5, max_active=2)) == 2
    assert await jobs.claim("w2", ["k"], lease_s=LEASE, limit=5, max_active=2) == []
    assert await jobs.count_active("k") == 2
    clock.advance(LEASE)  # both leases lapse: they no longer count, and are claimable again
    assert await jobs.count_active("k") == 0
    assert len(await jobs.claim("w2", ["k"], lease_s=LEASE, limit=5, max_active=3)) == 3


async def test_count_active_counts_claimed_and_running_of_one_kind(jobs: JobStore) -> None:
    one = await claimed(jobs)
    await claimed(jobs)
    await jobs.start(one.id, "w1")
    await jobs.enqueue("k")
    await claimed(jobs, kind="other")
    assert await jobs.count_active("k") == 2
    await jobs.succeed(one.id, "w1")
    assert await jobs.count_active("k") == 1


async def test_two_connections_claiming_concurrently_never_share_a_job(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        ids = {(await a.enqueue("k")).id for _ in range(60)}

        async def take(store: JobStore, worker: str) -> list[str]:
            got: list[str] = []
            while batch := await store.claim(worker, ["k"], lease_s=LEASE, limit=3):
                got += [job.id for job in batch]
            return got

        results = await asyncio.gather(*(take(s, f"w{i}") for i, s in enumerate([a, b, a, b])))
        taken = [job_id for result in results for job_id in result]
        assert sorted(taken) == sorted(ids)


# -- the attempt's outcome ---------------------------------------------------------------------
async def test_start_heartbeat_succeed(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs)
    running = await jobs.start(job.id, "w1")
    assert running.state is JobState.RUNNING
    clock.advance(20)
    beat = await jobs.heartbeat(job.id, "w1", lease_s=LEASE)
    assert beat.lease_expires_at == at(20 + LEASE)
    assert beat.history == running.history  # renewals are not state changes
    done = await jobs.succeed(job.id, "w1", result={"post_id": "p1"})
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"post_id": "p1"}
    assert (done.lease_owner, done.lease_expires_at) == (None, None)
    assert [e.state for e in done.history] == [
        JobState.PENDING,
        JobState.CLAIMED,
        JobState.RUNNING,
        JobState.SUCCEEDED,
    ]


async def test_renewal_is_stored_and_changes_nothing_else(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, payload={"caption": "héllo"})
    running = await jobs.start(job.id, "w1")
    clock.advance(12.345678)
    beat = await jobs.heartbeat(job.id, "w1", lease_s=LEASE)
    assert await jobs.get(job.id) == beat
    assert beat == running.model_copy(
        update={"lease_expires_at": clock() + timedelta(seconds=LEASE), "updated_at": clock()}
    )


async def test_a_renewal_by_a_stale_owner_fails_and_leaves_the_lease_alone(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, "stale")
    await jobs.start(job.id, "stale")
    clock.advance(LEASE)  # its renewals stopped (a long pause): another worker takes over
    [taken] = await jobs.claim("fresh", ["k"], lease_s=LEASE)
    with pytest.raises(LeaseLost, match="leased to fresh"):
        await jobs.heartbeat(job.id, "stale", lease_s=LEASE)
    assert await jobs.get(job.id) == taken  # the refused renewal wrote nothing
    renewed = await jobs.heartbeat(job.id, "fresh", lease_s=LEASE)
    assert renewed.lease_expires_at == clock() + timedelta(seconds=LEASE)
    await jobs.succeed(job.id, "fresh")
    with pytest.raises(LeaseLost, match="succeeded"):
        await jobs.heartbeat(job.id, "fresh", lease_s=LEASE)
    with pytest.raises(JobNotFound):
        await jobs.heartbeat("missing", "fresh", lease_s=LEASE)


async def test_an_expired_lease_nobody_took_over_can_still_be_renewed(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs)
    clock.advance(LEASE + 5)  # late, but nobody else runs it: finishing beats running twice
    beat = await jobs.heartbeat(job.id, "w1", lease_s=LEASE)
    assert beat.lease_expires_at == clock() + timedelta(seconds=LEASE)
    assert await jobs.claim("w2", ["k"], lease_s=LEASE) == []


async def test_racing_renewal_and_takeover_leave_one_owner(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        for round_ in range(10):
            job = await claimed(a, "old")
            clock.advance(LEASE)
            renewal, takeover = await asyncio.gather(
                a.heartbeat(job.id, "old", lease_s=LEASE),
                b.claim("new", ["k"], lease_s=LEASE),
                return_exceptions=True,
            )
            stored = await a.get(job.id)
            assert stored is not None
            if isinstance(renewal, LeaseLost):  # the takeover came first
                assert takeover == [stored] and stored.lease_owner == "new", round_
            else:  # the renewal came first: the lease was live again, nothing to take over
                assert takeover == [] and stored == renewal and stored.lease_owner == "old"
            await a.cancel(job.id)


async def test_writes_by_a_worker_without_the_lease_raise_lease_lost(jobs: JobStore) -> None:
    job = await claimed(jobs)
    for call in (
        jobs.start(job.id, "w2"),
        jobs.heartbeat(job.id, "w2", lease_s=LEASE),
        jobs.succeed(job.id, "w2"),
        jobs.fail(job.id, "w2", error="x", retry_at=None),
        jobs.defer(job.id, "w2", until=at(10), reason="x"),
        jobs.release(job.id, "w2"),
        jobs.await_approval(job.id, "w2"),
    ):
        with pytest.raises(LeaseLost):
            await call
    await jobs.cancel(job.id, reason="operator")
    with pytest.raises(LeaseLost, match="cancelled"):
        await jobs.heartbeat(job.id, "w1", lease_s=LEASE)


async def test_fail_retries_at_the_given_time_until_attempts_run_out(
    jobs: JobStore, clock: ManualClock
) -> None:
    job = await claimed(jobs, max_attempts=2)
    retried = await jobs.fail(job.id, "w1", error="boom", retry_at=at(10))
    assert retried.state is JobState.PENDING
    assert (retried.run_at, retried.attempts, retried.last_error) == (at(10), 1, "boom")
    assert retried.lease_owner is None
    assert await jobs.claim("w1", ["k"], lease_s=LEASE) == []
    clock.advance(10)
    [again] = await jobs.claim("w1", ["k"], lease_s=LEASE)
    assert again.attempts == 2
    failed = await jobs.fail(job.id, "w1", error="boom again", retry_at=at(30))
    assert failed.state is JobState.FAILED
    assert failed.last_error == "boom again"


async def test_fail_without_retry_time_is_final(jobs: JobStore) -> None:
    job = await claimed(jobs, max_attempts=5)
    failed = await jobs.fail(job.id, "w1", error="bad input", retry_at=None)
    assert (failed.state, failed.attempts) == (JobState.FAILED, 1)


async def test_long_errors_are_clipped(jobs: JobStore) -> None:
    job = await claimed(jobs)
    failed = await jobs.fail(job.id, "w1", error="x" * 10_000, retry_at=None)
    assert failed.last_error is not None and len(failed.last_error) <= 2000


async def test_defer_gives_the_attempt_back(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs, max_attempts=1)
    await jobs.start(job.id, "w1")
    waiting = await jobs.defer(job.id, "w1", until=at(3600), reason="quota")
    assert (waiting.state, waiting.attempts, waiting.run_at) == (JobState.PENDING, 0, at(3600))
    assert "quota" in (waiting.history[-1].note or "")
    clock.advance(3600)
    [again] = await jobs.claim("w1", ["k"], lease_s=LEASE)
    assert again.attempts == 1  # still within max_attempts=1


async def test_release_gives_the_job_back_due_now(jobs: JobStore, clock: ManualClock) -> None:
    job = await claimed(jobs)
    clock.advance(5)
    released = await jobs.release(job.id, "w1")
    assert (released.state, released.attempts, released.run_at) == (JobState.PENDING, 0, at(5))
    assert len(await jobs.claim("w2", ["k"], lease_s=LEASE)) == 1
