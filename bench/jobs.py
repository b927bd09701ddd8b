"""Job throughput on SQLite: jobs claimed and completed per second with 1 and 4 workers.

Each run enqueues ``--jobs`` no-op jobs into a fresh SQLite file, then lets the workers drain it:
every job is claimed, started and recorded as succeeded (three transactions per job, claims
batched up to ``--concurrency`` per worker). Workers run as asyncio tasks in this process, each
with its own connection (``tasks``), or as separate OS processes (``processes``, the figure that
matters for several ``carrier run`` on one machine; timed from when all have started up).

    .venv/bin/python bench/jobs.py --jobs 2000 --workers 1 4
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carrier.jobs import Job, JobContext, JobState, SQLiteJobStore, Worker


async def noop(job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
    return None


async def drain(path: Path, worker_id: str, concurrency: int, *, child: bool = False) -> int:
    async with SQLiteJobStore(path=path) as store:
        worker = Worker(store=store, worker_id=worker_id, max_concurrent=concurrency)
        worker.register("noop", noop)
        if child:  # start together with the other processes, after start-up
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        await worker.drain()
        return worker.stats.succeeded


async def fill(path: Path, jobs: int) -> float:
    async with SQLiteJobStore(path=path) as store:
        started = time.perf_counter()
        for _ in range(jobs):
            await store.enqueue("noop")
        return jobs / (time.perf_counter() - started)


async def run_tasks(path: Path, workers: int, concurrency: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(drain(path, f"w{i}", concurrency) for i in range(workers)))
    return time.perf_counter() - started


async def run_processes(path: Path, workers: int, concurrency: int) -> float:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--child",
            str(path),
            f"p{i}",
            str(concurrency),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for i in range(workers)
    ]
    for proc in procs:  # every process started up and opened the store
        assert proc.stdout is not None
        await proc.stdout.readline()
    started = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
    codes = await asyncio.gather(*(proc.wait() for proc in procs))
    if any(codes):
        raise SystemExit(f"a worker process failed: exit codes {codes}")
    return time.perf_counter() - started


async def check(path: Path, jobs: int) -> None:
    async with SQLiteJobStore(path=path) as store:
        done = await store.list_jobs(states=[JobState.SUCCEEDED], limit=None)
    twice = [job.id for job in done if job.attempts != 1]
    if len(done) != jobs or twice:
        raise SystemExit(f"expected {jobs} jobs done once each; got {len(done)}, {twice[:3]}")


async def main(args: argparse.Namespace) -> None:
    print(f"{args.jobs} no-op jobs, SQLite (WAL), up to {args.concurrency} in flight per worker")
    for mode in args.modes:
        for workers in args.workers:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "carrier.db"
                enqueue_rate = await fill(path, args.jobs)
                runner = run_tasks if mode == "tasks" else run_processes
                elapsed = await runner(path, workers, args.concurrency)
                await check(path, args.jobs)
            print(
                f"  {mode:<9} {workers} worker(s): {args.jobs / elapsed:8.0f} jobs/s "
                f"({elapsed:.2f} s; enqueue {enqueue_rate:.0f} jobs/s)"
            )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--modes", nargs="+", choices=["tasks", "processes"], default=["tasks", "processes"]
    )
    return parser.parse_args()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        asyncio.run(drain(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), child=True))
    else:
        asyncio.run(main(parse()))
