"""A worker's leases: the heartbeat, the fence before an effect, committed progress, and the
lease length the settings give ``carrier run``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.jobs import (
    Backoff,
    Job,
    JobContext,
    JobState,
    JobStore,
    ManualClock,
    PermanentFailure,
    Worker,
)
from carrier.jobs.service import JobService
from carrier.settings import load_settings
from tests.jobs.conftest import at

LEASE = 30.0


def make_worker(jobs: JobStore, clock: ManualClock, name: str, **kw: Any) -> Worker:
    kw.setdefault("backoff", Backoff(jitter=0))
    return Worker(store=jobs, clock=clock, worker_id=name, lease_s=LEASE, **kw)


async def stored(jobs: JobStore, job: Job) -> Job:
    got = await jobs.get(job.id)
    assert got is not None
    return got


async def test_a_handler_fenced_out_by_a_takeover_records_nothing(
    jobs: JobStore, clock: ManualClock
) -> None:
    paused, resume = asyncio.Event(), asyncio.Event()
    effects: list[str] = []

    async def publish(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        if ctx.worker_id == "slow":
            paused.set()
            await resume.wait()  # a long pause: its lease lapses and "fast" takes over
        await ctx.ensure_held()  # right before the effect that must happen once
        effects.append(ctx.worker_id)
        return {"by": ctx.worker_id}

    slow, fast = make_worker(jobs, clock, "slow"), make_worker(jobs, clock, "fast")
    for worker in (slow, fast):
        worker.register("k", publish)
    job = await jobs.enqueue("k")
    await slow.tick()
    await paused.wait()
    clock.advance(LEASE)
    await fast.drain()
    resume.set()
    await slow.join()
    assert effects == ["fast"]  # the stale worker never reached its effect
    assert slow.stats.lost == 1 and slow.stats.failed == 0
    done = await stored(jobs, job)
    assert (done.state, done.result, done.crashes, done.attempts) == (
        JobState.SUCCEEDED,
        {"by": "fast"},
        1,
        1,
    )


async def test_the_fence_renews_the_lease(jobs: JobStore, clock: ManualClock) -> None:
    async def fenced(job: Job, ctx: JobContext) -> None:
        clock.advance(LEASE - 1)
        await ctx.ensure_held()
        renewed = await ctx.store.get(job.id)
        assert renewed is not None and renewed.lease_expires_at == at(2 * LEASE - 1)

    worker = make_worker(jobs, clock, "w1")
    worker.register("k", fenced)
    job = await jobs.enqueue("k")
    await worker.drain()
    assert (await stored(jobs, job)).state is JobState.SUCCEEDED


async def test_a_failure_after_a_committed_effect_succeeds_with_a_warning(
    jobs: JobStore, clock: ManualClock
) -> None:
    async def post(job: Job, ctx: JobContext) -> None:
        await ctx.checkpoint({"media_id": "m1"}, committed=True)
        raise PermanentFailure("the permalink could not be read")

    worker = make_worker(jobs, clock, "w1")
    worker.register("k", post)
    job = await jobs.enqueue("k", max_attempts=1)
    await worker.drain()
    done = await stored(jobs, job)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {
        "media_id": "m1",
        "warning": "PermanentFailure: the permalink could not be read",
    }
    assert (worker.stats.succeeded, worker.stats.failed) == (1, 0)


async def test_a_worker_that_claims_back_its_own_lapsed_job_runs_it_once(
    jobs: JobStore, clock: ManualClock
) -> None:
    gate = asyncio.Event()
    runs: list[str] = []

    async def slow(job: Job, ctx: JobContext) -> None:
        runs.append(job.id)
        await gate.wait()

    worker = make_worker(jobs, clock, "w1")
    worker.register("k", slow)
    job = await jobs.enqueue("k")
    await worker.tick()
    await asyncio.sleep(0)  # the handler starts
    clock.advance(LEASE)  # the loop stalled past a renewal: the lease lapsed
    assert await worker.tick() == 1  # claimed back by itself ...
    gate.set()
    await worker.join()
    assert runs == [job.id]  # ... without a second handler
    assert (await stored(jobs, job)).state is JobState.SUCCEEDED


async def test_the_heartbeat_renews_every_third_of_the_lease(tmp_path: Path) -> None:
    """With the real clock: a job that outlives its lease several times over is never taken
    over, because the worker renews it (the rival polls all along)."""
    from carrier.jobs import SQLiteJobStore

    done = asyncio.Event()

    async def long(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        await done.wait()
        return {"by": ctx.worker_id}

    async with SQLiteJobStore(path=tmp_path / "carrier.db") as jobs:
        owner = Worker(store=jobs, worker_id="owner", lease_s=1.0, poll_s=0.05)
        rival = Worker(store=jobs, worker_id="rival", lease_s=1.0, poll_s=0.05)
        owner.register("k", long)
        job = await jobs.enqueue("k")
        await owner.tick()
        rival.register("k", long)
        running = asyncio.create_task(owner.run())
        polling = asyncio.create_task(rival.run())
        for _ in range(35):  # ~3.5 s: more than three leases
            await asyncio.sleep(0.1)
        done.set()
        await owner.stop()
        await rival.stop()
        await asyncio.gather(running, polling)
        finished = await stored(jobs, job)
    assert (finished.state, finished.result, finished.crashes) == (
        JobState.SUCCEEDED,
        {"by": "owner"},
        0,
    )


def test_carrier_run_takes_the_lease_from_the_settings(tmp_path: Path) -> None:
    default = JobService.from_settings(load_settings({"CARRIER_DATA_DIR": str(tmp_path)}))
    assert default.worker.lease_s == 10.0
    short = JobService.from_settings(
        load_settings({"CARRIER_DATA_DIR": str(tmp_path), "CARRIER_JOB_LEASE_SECONDS": "2.5"})
    )
    assert short.worker.lease_s == 2.5
