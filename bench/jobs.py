"""Job throughput on SQLite: jobs claimed and completed per second with 1 and 4 workers; and
how soon a killed worker's job is taken over.

Each run enqueues ``--jobs`` no-op jobs into a fresh SQLite file, then lets the workers drain it:
every job is claimed, started and recorded as succeeded (three transactions per job, claims
batched up to ``--concurrency`` per worker). Workers run as asyncio tasks in this process, each
with its own connection (``tasks``), or as separate OS processes (``processes``, the figure that
matters for several ``carrier run`` on one machine; timed from when all have started up).

``takeover``: ``--kills`` times, a worker process runs a long job and is killed with SIGKILL;
a worker in this process takes the job over once its lease (``--lease``, the default of
``CARRIER_JOB_LEASE_SECONDS``) expires. It prints the time from the kill to that claim, and
checks that the crashes were counted as crashes and no attempt was used.

    .venv/bin/python bench/jobs.py --jobs 2000 --workers 1 4
    .venv/bin/python bench/jobs.py --modes takeover --kills 5
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
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


async def hold(path: Path, lease_s: float) -> None:
    """A worker process that runs one long job until it is killed."""

    async def forever(job: Job, ctx: JobContext) -> None:
        print("running", flush=True)
        await asyncio.Event().wait()

    async with SQLiteJobStore(path=path) as store:
        worker = Worker(store=store, worker_id="doomed", lease_s=lease_s, poll_s=0.05)
        worker.register("long", forever)
        await worker.run()


async def takeover(kills: int, lease_s: float) -> None:
    print(f"takeover after kill -9, lease {lease_s:g} s (renewed every {lease_s / 3:.2g} s)")
    logging.getLogger("carrier.jobs").setLevel(logging.ERROR)  # each takeover logs a warning
    rng = random.Random(15)
    delays: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "carrier.db"
        async with SQLiteJobStore(path=path) as store:
            for _ in range(kills):
                job = await store.enqueue("long")
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--hold",
                    str(path),
                    str(lease_s),
                    stdout=asyncio.subprocess.PIPE,
                )
                assert proc.stdout is not None
                await proc.stdout.readline()  # its handler runs
                await asyncio.sleep(rng.uniform(0, lease_s))  # a random point of the lease
                proc.send_signal(signal.SIGKILL)
                killed = datetime.now(UTC)
                await proc.wait()
                survivor = Worker(store=store, worker_id="survivor", lease_s=lease_s, poll_s=0.05)
                survivor.register("long", noop)
                while (done := await store.get(job.id)) and done.state is not JobState.SUCCEEDED:
                    await survivor.drain()
                    await asyncio.sleep(0.05)
                assert done is not None and (done.attempts, done.crashes) == (1, 1), done
                taken = next(e for e in done.history if e.worker == "survivor")
                delays.append((taken.at - killed).total_seconds())
    print(
        f"  {kills} kills: taken over after p50 {statistics.median(delays):.1f} s, "
        f"max {max(delays):.1f} s; each job used 1 attempt and counted 1 crash"
    )


async def main(args: argparse.Namespace) -> None:
    if "takeover" in args.modes:
        await takeover(args.kills, args.lease)
    modes = [mode for mode in args.modes if mode != "takeover"]
    if not modes:
        return
    print(f"{args.jobs} no-op jobs, SQLite (WAL), up to {args.concurrency} in flight per worker")
    for mode in modes:
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
        "--modes",
        nargs="+",
        choices=["tasks", "processes", "takeover"],
        default=["tasks", "processes", "takeover"],
    )
    parser.add_argument("--kills", type=int, default=3, help="takeover: how many kills")
    parser.add_argument("--lease", type=float, default=10.0, help="takeover: lease seconds")
    return parser.parse_args()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        asyncio.run(drain(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), child=True))
    elif len(sys.argv) == 4 and sys.argv[1] == "--hold":
        asyncio.run(hold(Path(sys.argv[2]), float(sys.argv[3])))
    else:
        asyncio.run(main(parse()))
