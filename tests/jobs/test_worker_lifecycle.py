"""Worker lifecycle: the run loop, clean stops, crashes, lost leases, errors that must not kill it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from carrier.errors import StoreError
from carrier.jobs import Backoff, Job, JobContext, JobState, JobStore, ManualClock, Worker
from carrier.jobs.sqlite import SQLiteJobStore
from tests.jobs.conftest import JobStoreFactory, at

LEASE = 30.0


class Gate:
    """A handler that blocks until released, and says when it started and if it was cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.open = asyncio.Event()
        self.cancelled = 0
        self.runs: list[str] = []

    async def __call__(self, job: Job, ctx: JobContext) -> Mapping[str, Any]:
        self.runs.append(ctx.worker_id)
        self.started.set()
        try:
            await self.open.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return {"by": ctx.worker_id}


def make_worker(jobs: JobStore, clock: ManualClock, name: str, **kw: Any) -> Worker:
    kw.setdefault("backoff", Backoff(jitter=0))
    return Worker(store=jobs, clock=clock, worker_id=name, lease_s=LEASE, **kw)


async def stored(jobs: JobStore, job: Job) -> Job:
    got = await jobs.get(job.id)
    assert got is not None
    return got


def test_register_is_all_or_nothing(jobs: JobStore, clock: ManualClock) -> None:
    worker = make_worker(jobs, clock, "w1")
    worker.register("k", Gate())
    with pytest.raises(ValueError, match="already registered"):
        worker.register("k", Gate())
    with pytest.raises(ValueError, match="at least 1"):
        worker.register("j", Gate(), max_concurrent=0)
    worker.unregister("k")
    assert worker.kinds == []


async def test_run_loop_runs_jobs_and_stops_cleanly(jobs: JobStore, clock: ManualClock) -> None:
    gate = Gate()
    worker = make_worker(jobs, clock, "w1", poll_s=3600)  # only notify() wakes it
    worker.register("k", gate)
    running = asyncio.create_task(worker.run())
    job = await jobs.enqueue("k")
    worker.notify()
    await gate.started.wait()
    gate.open.set()
    await worker.stop()
    await running
    assert (await stored(jobs, job)).state is JobState.SUCCEEDED


async def test_a_running_worker_refuses_a_second_run(jobs: JobStore, clock: ManualClock) -> None:
    worker = make_worker(jobs, clock, "w1", poll_s=3600)
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0)  # one turn of the loop: run() has started (ordering, not timing)
    with pytest.raises(RuntimeError, match="already running"):
        await worker.run()
    await worker.stop()
    await running


async def test_a_worker_stopped_before_it_runs_does_not_run(
    jobs: JobStore, clock: ManualClock
) -> None:
    worker = make_worker(jobs, clock, "w1", poll_s=3600)
    worker.register("k", Gate())
    await jobs.enqueue("k")
    await worker.stop()
    await worker.run()  # returns at once
    assert worker.stats.claimed == 0


async def test_stop_without_grace_releases_in_flight_jobs(
    jobs: JobStore, clock: ManualClock
) -> None:
    gate = Gate()
    worker = make_worker(jobs, clock, "w1")
    worker.register("k", gate)
    job = await jobs.enqueue("k", max_attempts=1)
    await worker.tick()
    await gate.started.wait()
    await worker.stop(grace_s=0)
    released = await stored(jobs, job)
    assert (released.state, released.attempts, released.lease_owner) == (JobState.PENDING, 0, None)
    assert gate.cancelled == 1
    assert worker.stats.released == 1
    assert await worker.tick() == 0  # a stopped worker claims nothing


async def test_stop_with_grace_lets_in_flight_jobs_finish(
    jobs: JobStore, clock: ManualClock
) -> None:
    gate = Gate()
    worker = make_worker(jobs, clock, "w1")
    worker.register("k", gate)
    job = await jobs.enqueue("k")
    running = asyncio.create_task(worker.run())
    await gate.started.wait()
    stopping = asyncio.create_task(worker.stop(grace_s=None))
    gate.open.set()
    await stopping
    await running
    assert (await stored(jobs, job)).state is JobState.SUCCEEDED
    assert gate.cancelled == 0


async def test_killed_worker_job_is_taken_over_after_its_lease_expires(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        doomed, survivor = Gate(), Gate()
        survivor.open.set()
        worker_a = make_worker(a, clock, "a")
        worker_a.register("k", doomed)
        worker_b = make_worker(b, clock, "b")
        worker_b.register("k", survivor)
        job = await a.enqueue("k")
        running = asyncio.create_task(worker_a.run())
        await doomed.started.wait()
        running.cancel()  # killed: nothing is written, the lease stays
        with pytest.raises(asyncio.CancelledError):
            await running
        held = await stored(b, job)
        assert (held.state, held.lease_owner) == (JobState.RUNNING, "a")
        await worker_b.drain()
        assert survivor.runs == []  # the lease is still live
        clock.advance(LEASE)
        await worker_b.drain()
        done = await stored(b, job)
        assert (done.state, done.attempts, done.crashes) == (JobState.SUCCEEDED, 1, 1)
        assert done.result == {"by": "b"}
        assert worker_b.stats.taken_over == 1


async def test_operator_cancel_stops_the_running_handler(
    jobs: JobStore, clock: ManualClock
) -> None:
    gate = Gate()
    worker = make_worker(jobs, clock, "w1")
    worker.register("k", gate)
    job = await jobs.enqueue("k")
    await worker.tick()
    await gate.started.wait()
    await jobs.cancel(job.id, reason="wrong photo")
    await worker.renew_leases()
    await worker.join()
    assert gate.cancelled == 1
    assert worker.stats.lost == 1
    cancelled = await stored(jobs, job)
    assert (cancelled.state, cancelled.last_error) == (JobState.CANCELLED, "cancelled: wrong photo")


async def test_renewal_keeps_a_long_job_and_a_lapsed_one_is_stopped(
    jobs: JobStore, clock: ManualClock
) -> None:
    slow, other = Gate(), Gate()
    other.open.set()
    worker = make_worker(jobs, clock, "w1")
    worker.register("k", slow)
    rival = make_worker(jobs, clock, "w2")
    rival.register("k", other)
    job = await jobs.enqueue("k")
    await worker.tick()
    await slow.started.wait()
    clock.advance(LEASE - 1)
    await worker.renew_leases()
    assert (await stored(jobs, job)).lease_expires_at == at(2 * LEASE - 1)
    clock.advance(LEASE)  # renewal missed (a long GC pause): the rival takes over
    await rival.drain()
    await worker.renew_leases()
    await worker.join()
    assert slow.cancelled == 1 and worker.stats.lost == 1
    done = await stored(jobs, job)
    assert (done.state, done.result) == (JobState.SUCCEEDED, {"by": "w2"})


async def test_finishing_after_losing_the_lease_records_nothing(
    jobs: JobStore, clock: ManualClock
) -> None:
    slow, other = Gate(), Gate()
    worker = make_worker(jobs, clock, "w1")
    worker.register("k", slow)
    rival = make_worker(jobs, clock, "w2")
    rival.register("k", other)
    job = await jobs.enqueue("k")
    await worker.tick()
    await slow.started.wait()
    clock.advance(LEASE)
    await rival.tick()
    await other.started.wait()
    slow.open.set()  # the first worker finishes late: its write is refused
    await worker.join()
    assert worker.stats.lost == 1 and worker.stats.succeeded == 0
    other.open.set()
    await rival.join()
    assert (await stored(jobs, job)).result == {"by": "w2"}


class FlakyStore(SQLiteJobStore):
    """Fails the first claim, as a locked or briefly unreachable database would."""

    failures = 1

    async def claim(self, worker_id: str, kinds: Sequence[str], **kw: Any) -> list[Job]:
        if self.failures:
            self.failures -= 1
            raise StoreError("database is locked")
        return await super().claim(worker_id, kinds, **kw)


async def test_one_bad_job_or_a_store_error_does_not_kill_the_loop(
    tmp_path: Any, clock: ManualClock
) -> None:
    done = asyncio.Event()
    seen: list[str] = []

    async def handler(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        seen.append(job.payload["name"])
        if job.payload["name"] == "bad":
            raise ZeroDivisionError("bad job")
        if len(seen) == 2:
            done.set()
        return {}

    async with FlakyStore(path=tmp_path / "jobs.db", clock=clock) as jobs:
        worker = make_worker(jobs, clock, "w1", poll_s=0.001, max_concurrent=1)
        worker.register("k", handler)
        bad = await jobs.enqueue("k", payload={"name": "bad"}, max_attempts=1, run_at=at(-1))
        good = await jobs.enqueue("k", payload={"name": "good"})
        running = asyncio.create_task(worker.run())
        await done.wait()
        await worker.stop()
        await running
        assert seen == ["bad", "good"]
        assert (await stored(jobs, bad)).state is JobState.FAILED
        assert (await stored(jobs, good)).state is JobState.SUCCEEDED
        assert worker.stats.errors == 1 and worker.stats.failed == 1


def test_worker_settings_are_checked(jobs: JobStore) -> None:
    with pytest.raises(ValueError):
        Worker(store=jobs, lease_s=0)
    with pytest.raises(ValueError):
        Worker(store=jobs, max_concurrent=0)
    assert "-" in Worker(store=jobs).worker_id  # host-pid-random
