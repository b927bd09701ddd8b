"""Scheduler: materializes each next occurrence once, even with two schedulers on one store."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from carrier.jobs import (
    CronSpec,
    IntervalSpec,
    Job,
    JobState,
    JobStore,
    ManualClock,
    OnceSpec,
    Schedule,
    Scheduler,
)
from tests.jobs.conftest import T0, JobStoreFactory, at


def daily(name: str = "digest") -> Schedule:
    return Schedule(
        name=name,
        kind="digest",
        agent_id="a1",
        payload={"x": 1},
        spec=CronSpec(expr="0 9 * * *"),
        max_attempts=2,
        timeout_s=30,
    )


async def scheduled(jobs: JobStore, kind: str = "digest") -> list[Job]:
    return sorted(await jobs.list_jobs(kind=kind, limit=None), key=lambda j: j.run_at)


async def test_cron_schedule_materializes_the_next_occurrence_once(
    jobs: JobStore, clock: ManualClock
) -> None:
    scheduler = Scheduler(store=jobs, clock=clock)
    await scheduler.add(daily())
    for _ in range(3):
        await scheduler.tick()
    [job] = await scheduled(jobs)
    assert job.run_at == T0.replace(day=2, hour=9)
    assert job.idempotency_key == "schedule:digest:2024-05-02T09:00:00+00:00"
    assert (job.agent_id, job.payload, job.max_attempts, job.timeout_s) == ("a1", {"x": 1}, 2, 30)
    clock.set(job.run_at)
    await scheduler.tick()
    await scheduler.tick()
    assert [j.run_at.day for j in await scheduled(jobs)] == [2, 3]
    stored = await jobs.get_schedule("digest")
    assert stored is not None and stored.next_at == T0.replace(day=3, hour=9)


async def test_interval_schedule_follows_the_jittered_plan(
    jobs: JobStore, clock: ManualClock
) -> None:
    scheduler = Scheduler(store=jobs, clock=clock, rng=random.Random(3))
    await scheduler.add(
        Schedule(name="posts", kind="post", spec=IntervalSpec(min_s=5400, max_s=10800))
    )
    for _ in range(20):
        await scheduler.tick()
        latest = (await scheduled(jobs, "post"))[-1]
        clock.set(latest.run_at)
    runs = [job.run_at for job in await scheduled(jobs, "post")]
    assert len(runs) == 20  # the first tick makes one, each later tick the next
    gaps = [b - a for a, b in zip([T0, *runs], runs, strict=False)]
    assert all(timedelta(minutes=90) <= gap <= timedelta(minutes=180) for gap in gaps)


async def test_one_off_schedule_makes_one_job_and_finishes(
    jobs: JobStore, clock: ManualClock
) -> None:
    scheduler = Scheduler(store=jobs, clock=clock)
    await scheduler.add(Schedule(name="launch", kind="announce", spec=OnceSpec(at=at(3600))))
    await scheduler.tick()
    clock.advance(7200)
    for _ in range(3):
        await scheduler.tick()
    [job] = await scheduled(jobs, "announce")
    assert job.run_at == at(3600)
    stored = await jobs.get_schedule("launch")
    assert stored is not None and stored.finished
    await scheduler.add(Schedule(name="launch", kind="announce", spec=OnceSpec(at=at(3600))))
    await scheduler.tick()  # stored again unchanged: still finished, no second job
    assert len(await scheduled(jobs, "announce")) == 1


async def test_disabled_schedules_make_nothing(jobs: JobStore, clock: ManualClock) -> None:
    scheduler = Scheduler(store=jobs, clock=clock)
    await scheduler.add(daily().model_copy(update={"enabled": False}))
    assert await scheduler.tick() == []
    assert await jobs.list_jobs() == []


async def test_a_crash_between_advancing_and_enqueueing_loses_no_occurrence(
    jobs: JobStore, clock: ManualClock
) -> None:
    await jobs.put_schedule(daily())
    due = T0.replace(day=2, hour=9)
    assert await jobs.advance_schedule("digest", expected=None, next_at=due)  # then "crashed"
    clock.set(due + timedelta(hours=1))
    await Scheduler(store=jobs, clock=clock).tick()
    assert [j.run_at for j in await scheduled(jobs)] == [due, due + timedelta(days=1)]


async def test_two_schedulers_create_each_occurrence_once(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        # Different random sources: without the compare-and-set they would pick different times.
        one = Scheduler(store=a, clock=clock, rng=random.Random(1))
        two = Scheduler(store=b, clock=clock, rng=random.Random(2))
        await one.add(Schedule(name="posts", kind="post", spec=IntervalSpec(min_s=60, max_s=600)))
        await two.add(daily())
        await two.add(Schedule(name="posts", kind="post", spec=IntervalSpec(min_s=60, max_s=600)))
        for _ in range(30):
            await asyncio.gather(one.tick(), two.tick(), one.tick())
            # One chain of occurrences: exactly one job is waiting for its time.
            upcoming = [j for j in await scheduled(a, "post") if j.run_at > clock()]
            assert len(upcoming) == 1
            clock.advance(120)
        posts = await scheduled(a, "post")
        assert len({job.idempotency_key for job in posts}) == len(posts) > 5
        assert len(await scheduled(a)) == 1  # the daily one, due 2 May 09:00
        assert one.errors == two.errors == 0


async def test_run_ticks_until_stopped(jobs: JobStore, clock: ManualClock) -> None:
    ticked = asyncio.Event()

    class Watched(Scheduler):
        async def tick(self) -> list[Job]:
            jobs_made = await super().tick()
            ticked.set()
            return jobs_made

    scheduler = Watched(store=jobs, clock=clock, poll_s=3600)
    await scheduler.add(daily())
    running = asyncio.create_task(scheduler.run())
    await ticked.wait()
    await scheduler.stop()
    await running
    assert [j.state for j in await scheduled(jobs)] == [JobState.PENDING]
