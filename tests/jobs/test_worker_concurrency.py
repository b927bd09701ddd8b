"""Several workers on one store: every due job runs exactly once; concurrency limits hold."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.jobs import Job, JobContext, JobState, JobStore, ManualClock, SQLiteJobStore, Worker
from tests.jobs.conftest import JobStoreFactory, at

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """A no-op handler that counts runs per job id."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    async def __call__(self, job: Job, ctx: JobContext) -> Mapping[str, Any]:
        self.runs[job.id] += 1
        await asyncio.sleep(0)  # let the other worker interleave
        return {"by": ctx.worker_id}


async def test_two_workers_run_every_due_job_exactly_once(
    job_store_factory: JobStoreFactory, clock: ManualClock
) -> None:
    async with job_store_factory.new_store(clock) as a, job_store_factory.new_store(clock) as b:
        due = [(await a.enqueue("k", run_at=at(-(i % 7)))).id for i in range(120)]
        later = await a.enqueue("k", run_at=at(60))
        recorder = Recorder()
        workers = [
            Worker(store=s, clock=clock, worker_id=f"w{i}", max_concurrent=3)
            for i, s in enumerate([a, b, a])
        ]
        for worker in workers:
            worker.register("k", recorder)
        await asyncio.gather(*(w.drain() for w in workers))
        assert recorder.runs == Counter({job_id: 1 for job_id in due})
        finished = await a.list_jobs(states=[JobState.SUCCEEDED], limit=None)
        assert sorted(j.id for j in finished) == sorted(due)
        assert all(j.attempts == 1 for j in finished)
        pending = await a.get(later.id)
        assert pending is not None and pending.state is JobState.PENDING


async def test_max_concurrency_per_kind_holds_across_workers(
    jobs: JobStore, clock: ManualClock
) -> None:
    started: list[str] = []
    gate = asyncio.Event()

    async def post(job: Job, ctx: JobContext) -> None:
        started.append(ctx.worker_id)
        await gate.wait()

    async def other(job: Job, ctx: JobContext) -> None:
        return None

    workers = [Worker(store=jobs, clock=clock, worker_id=f"w{i}") for i in range(2)]
    for worker in workers:
        worker.register("post", post, max_concurrent=1)
        worker.register("other", other)
    posts = [await jobs.enqueue("post") for _ in range(3)]
    side = await jobs.enqueue("other")
    assert await workers[0].tick() == 2  # one post (the limit) and the other job
    assert await workers[1].tick() == 0
    assert await jobs.count_active("post") == 1
    gate.set()
    await asyncio.gather(*(w.join() for w in workers))
    await asyncio.gather(*(w.drain() for w in workers))
    for job in [*posts, side]:
        got = await jobs.get(job.id)
        assert got is not None and got.state is JobState.SUCCEEDED


async def test_worker_runs_at_most_max_concurrent_jobs(jobs: JobStore, clock: ManualClock) -> None:
    gate = asyncio.Event()

    async def wait(job: Job, ctx: JobContext) -> None:
        await gate.wait()

    worker = Worker(store=jobs, clock=clock, worker_id="w1", max_concurrent=2)
    worker.register("k", wait)
    for _ in range(5):
        await jobs.enqueue("k")
    assert await worker.tick() == 2
    assert await worker.tick() == 0
    assert len(worker.in_flight) == 2
    gate.set()
    await worker.drain()
    assert worker.stats.succeeded == 5


async def test_two_worker_processes_on_one_file_run_every_job_once(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteJobStore(path=path) as store:
        ids = {(await store.enqueue("k")).id for _ in range(300)}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.jobs._drain_worker",
            str(path),
            f"proc{i}",
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for i in range(2)
    ]
    outputs = await asyncio.gather(*(p.communicate() for p in procs))
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
    ran = [job_id for out, _ in outputs for job_id in json.loads(out)]
    assert Counter(ran) == Counter({job_id: 1 for job_id in ids})
    async with SQLiteJobStore(path=path) as store:
        done = await store.list_jobs(states=[JobState.SUCCEEDED], limit=None)
    assert len(done) == 300 and all(job.attempts == 1 for job in done)
