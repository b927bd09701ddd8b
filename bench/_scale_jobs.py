"""Jobs across worker processes over MongoDB: scheduled Instagram posts, published by 1 or 2
``carrier run --no-api`` workers against the loopback fake Graph API at ``call_latency_s`` a call.

The jobs half of ``bench/scale.py`` (which calls :func:`run_jobs`); also standalone, with a
SecantusDB of its own on a free loopback port (no network)::

    .venv/bin/python -m bench._scale_jobs --workers 1 2            # 200 posts, 200 ms a call

What runs, all real but the platform:

- the workers are real ``carrier run --no-api`` processes (:mod:`tests.deploy._carrier`: the
  hashing embedder, the fake model) over one MongoDB database, started one after the other
  (the first imports the character files) and all ready before the first post is due;
- ``agents`` Instagram agents, each its own account on its own loopback fake Graph API that
  answers every API call after ``call_latency_s``, media on one loopback FTP server
  (:mod:`bench._instagram_world`);
- the posts come in as scheduled uploads (``POST /{agent_id}/media`` with a ``publish_at``),
  all due at one moment a little after the workers are ready. Each ``instagram.post`` job
  checks the caption and hands on one ``instagram.publish`` job, which uploads the file by FTP,
  creates the container, checks its status and the quota, publishes, and reads the permalink
  (5 Graph calls).

Measured from the job records in the store: the time from the first claim of a post job to the
last publish job's end, posts published per second, which worker ran each job, and at most how
many publishes ran at once. Checked on the fakes: every post went out exactly once (its caption
is unique), none lost, no job failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script, or imported by bench/scale.py
    sys.path.insert(0, str(ROOT))

from bench._instagram_world import (  # noqa: E402
    FTP_PASSWORD,
    TOKEN,
    character,
    ftp_dirs,
    ftp_server,
    prepare,
    schedule_upload,
)
from bench._secantus import secantus_server  # noqa: E402
from carrier.assemble import open_store  # noqa: E402
from carrier.character import Character  # noqa: E402
from carrier.jobs.base import JobStore  # noqa: E402
from carrier.jobs.model import FINAL_STATES, Job, JobState  # noqa: E402
from carrier.jobs.mongo import MongoJobStore  # noqa: E402
from carrier.settings import load_settings  # noqa: E402
from clients.instagram.fake import FakeGraphAPI  # noqa: E402
from clients.instagram.jobs import POST_JOB_KIND, PUBLISH_JOB_KIND  # noqa: E402
from tests.deploy.procs import CarrierProcess, base_env  # noqa: E402

__all__ = ["run_jobs", "run_jobs_async"]

LEAD_S = 3.0
"""How far ahead of the last enqueue the posts are due: all become due at one moment."""
POLL_S = 0.25


def _claimed_at(job: Job) -> datetime | None:
    starts = [e.at for e in job.history if e.state in (JobState.CLAIMED, JobState.RUNNING)]
    return min(starts) if starts else None


def _ended(job: Job) -> tuple[datetime | None, str | None]:
    """When the job ended and the worker that ended it (its last run's)."""
    ends = [e for e in job.history if e.state in FINAL_STATES]
    if not ends:
        return None, None
    return ends[-1].at, ends[-1].worker or job.lease_owner


def _took(job: Job) -> float:
    """Seconds from the job's claim to its end (-1 if it has not both)."""
    start, end = _claimed_at(job), _ended(job)[0]
    return (end - start).total_seconds() if start and end else -1.0


async def _mine(jobs: JobStore, posts: dict[str, str]) -> tuple[list[Job], list[Job]]:
    """This run's post jobs and the publish jobs they handed on."""
    post_jobs = [j for j in await jobs.list_jobs(kind=POST_JOB_KIND, limit=None) if j.id in posts]
    publish_jobs = [
        j
        for j in await jobs.list_jobs(kind=PUBLISH_JOB_KIND, limit=None)
        if str(j.payload.get("post_job_id")) in posts
    ]
    return post_jobs, publish_jobs


OPEN = [JobState.PENDING, JobState.CLAIMED, JobState.RUNNING, JobState.AWAITING_APPROVAL]


async def _drained(
    jobs: JobStore, posts: dict[str, str], bound_s: float, workers: list[CarrierProcess]
) -> tuple[list[Job], list[Job], int]:
    """Wait until no post or publish job is left open (the database is this run's alone), or
    the bound passes (what is left then counts as lost). Meanwhile the store's own count of
    publish jobs held under a lease is sampled: the most seen at once is returned too. Cheap
    queries only, so the watching costs the workers little of the machine."""
    deadline = time.monotonic() + bound_s
    peak = 0
    while True:
        peak = max(peak, await jobs.count_active(PUBLISH_JOB_KIND))
        open_jobs = [
            job
            for kind in (POST_JOB_KIND, PUBLISH_JOB_KIND)
            for job in await jobs.list_jobs(states=OPEN, kind=kind, limit=1)
        ]
        dead = [w.name for w in workers if w.proc.poll() is not None]
        if not open_jobs or dead or time.monotonic() > deadline:
            if dead:
                print(f"worker(s) {', '.join(dead)} exited during the run", file=sys.stderr)
            elif open_jobs:
                print(f"posts still open after {bound_s:.0f} s; stopped waiting", file=sys.stderr)
            post_jobs, publish_jobs = await _mine(jobs, posts)
            return post_jobs, publish_jobs, peak
        await asyncio.sleep(POLL_S)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far; NaN where /proc does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _who(worker_id: str | None, workers: list[CarrierProcess]) -> str:
    """The process behind a job worker id (``<host>-<pid>-<hex>``), by its pid."""
    found = [w.name for w in workers if worker_id and f"-{w.proc.pid}-" in worker_id]
    return found[0] if found else worker_id or "?"


async def run_jobs_async(
    mongodb_uri: str,
    workers: int,
    *,
    jobs: int = 200,
    call_latency_s: float = 0.2,
    workdir: Path,
    agents: int = 4,
    bound_s: float | None = None,
    server_pid: int | None = None,
) -> dict[str, Any]:
    """See :func:`run_jobs`."""
    if workers < 1 or jobs < 1 or agents < 1:
        raise ValueError("run_jobs needs workers, jobs and agents of at least 1")
    bound_s = bound_s if bound_s is not None else 300.0 + jobs * (5.0 + 10 * call_latency_s)
    tag = uuid.uuid4().hex[:8]
    files = await asyncio.to_thread(prepare, workdir, agents, jobs, tag)
    size = len(await asyncio.to_thread(files[0].read_bytes))
    data, characters, ftp_root = workdir / "data", workdir / "characters", workdir / "ftp"

    def env(**extra: str) -> dict[str, str]:
        return base_env(
            data,
            mongodb_uri=mongodb_uri,
            CARRIER_CHARACTERS_DIR=str(characters),
            INSTAGRAM_ACCESS_TOKEN=TOKEN,
            FTP_PASSWORD=FTP_PASSWORD,
            **extra,
        )

    settings = load_settings(env())
    store = await open_store(settings)
    job_store = MongoJobStore.from_url(mongodb_uri)
    procs: list[CarrierProcess] = []
    try:
        await job_store.open()
        if await store.list_agents() or await job_store.list_jobs(limit=1):
            raise ValueError(
                "the MongoDB database given to run_jobs already holds agents or jobs, which its "
                "workers would run too; give it a database of its own (a new name)"
            )
        with contextlib.ExitStack() as fakes_stack:
            async with ftp_server(ftp_root) as ftp_port:
                fakes = []
                for i in range(agents):
                    fake = FakeGraphAPI(token=TOKEN, static_root=ftp_dirs(workdir, agents)[i])
                    fakes_stack.enter_context(fake)
                    fake.latency_s = call_latency_s
                    fake.quota_total = 1_000_000
                    fakes.append(fake)
                    text = json.dumps(character(i, fake, ftp_port))
                    await asyncio.to_thread((characters / f"harbour{i}.json").write_text, text)
                agent_ids = [
                    Character.model_validate(character(i, f, ftp_port)).agent_id
                    for i, f in enumerate(fakes)
                ]
                for n in range(1, workers + 1):  # one at a time: the first imports the files
                    name = f"w{n}"
                    proc = CarrierProcess.start(
                        "run", "--no-api", env=env(CARRIER_WORKER_ID=name), name=name
                    )
                    procs.append(proc)
                    await proc.wait_for("running (Ctrl-C to stop)", bound_s=180)
                    started = sum(1 for line in proc.lines if line.strip() == "started instagram")
                    if started != agents:
                        raise RuntimeError(
                            f"worker {name} started {started} of {agents} Instagram clients:\n"
                            + proc.output[-4000:]
                        )
                # Every post due at one moment, after they are all queued.
                due = datetime.now(UTC) + timedelta(seconds=LEAD_S + jobs * 0.02)
                posts: dict[str, str] = {}  # post job id -> caption
                captions: dict[str, int] = {}  # caption -> agent index
                for k in range(jobs):
                    agent = k % agents
                    caption = f"Dawn over the harbour, frame {k} of run {tag}."
                    job = await schedule_upload(
                        store, job_store, agent_ids[agent], files[k], caption, due, size
                    )
                    posts[job.id] = caption
                    captions[caption] = agent
                queued_late = datetime.now(UTC) > due
                watched = {p.name: p.proc.pid for p in procs}
                if server_pid is not None:
                    watched["mongodb"] = server_pid
                cpu_before = {name: _cpu_s(pid) for name, pid in watched.items()}
                here_before = time.process_time()
                load_before = os.getloadavg()[0]
                post_jobs, publish_jobs, peak = await _drained(job_store, posts, bound_s, procs)
                cpu = {n: round(_cpu_s(pid) - cpu_before[n], 1) for n, pid in watched.items()}
                cpu["bench"] = round(time.process_time() - here_before, 1)
                load = (round(load_before, 2), round(os.getloadavg()[0], 2))
                published = [
                    Counter(m["caption"] for m in fake.published) for fake in fakes
                ]  # per account
                graph_calls = sum(len(fake.state.requests) for fake in fakes)
            for proc in procs:
                proc.stop()
    finally:
        for proc in procs:
            proc.kill()
        await job_store.close()
        await store.close()
    return _figures(
        workers=workers,
        agents=agents,
        call_latency_s=call_latency_s,
        captions=captions,
        published=published,
        post_jobs=post_jobs,
        publish_jobs=publish_jobs,
        graph_calls=graph_calls,
        procs=procs,
        queued_late=queued_late,
        peak=peak,
        cpu=cpu,
        load=load,
    )


def _figures(
    *,
    workers: int,
    agents: int,
    call_latency_s: float,
    captions: dict[str, int],
    published: list[Counter[str]],
    post_jobs: list[Job],
    publish_jobs: list[Job],
    graph_calls: int,
    procs: list[CarrierProcess],
    queued_late: bool,
    peak: int,
    cpu: dict[str, float],
    load: tuple[float, float],
) -> dict[str, Any]:
    """The result: the time, the rate, and whether each post went out exactly once."""
    once = duplicates = lost = 0
    for caption, agent in captions.items():
        count = published[agent][caption]
        once += count == 1
        duplicates += max(count - 1, 0)
        lost += count == 0
    strays = sum(sum(c.values()) for c in published) - sum(
        published[a][c] for c, a in captions.items()
    )  # posts on the fakes that no upload asked for
    everything = post_jobs + publish_jobs
    not_succeeded = [j for j in everything if j.state is not JobState.SUCCEEDED]
    claims = [at for j in post_jobs if (at := _claimed_at(j)) is not None]
    ends = [at for j in publish_jobs if (at := _ended(j)[0]) is not None]
    seconds = (max(ends) - min(claims)).total_seconds() if claims and ends else float("nan")
    by_worker: dict[str, dict[str, int]] = {}
    for job in [j for j in everything if j.state in FINAL_STATES]:
        who = _who(_ended(job)[1], procs)
        kind = "publish" if job.kind == PUBLISH_JOB_KIND else "post"
        by_worker.setdefault(who, {"post": 0, "publish": 0})[kind] += 1
    durations = sorted(_took(j) for j in publish_jobs if _took(j) >= 0)
    post_durations = [_took(j) for j in post_jobs if _took(j) >= 0]
    return {
        "workers": workers,
        "agents": agents,
        "jobs": len(captions),
        "call_latency_s": call_latency_s,
        "seconds": round(seconds, 2),
        "jobs_per_s": round(once / seconds, 2) if seconds > 0 else 0.0,
        "job_runs_per_s": round(len(everything) / seconds, 2) if seconds > 0 else 0.0,
        "published_once": once == len(captions) and not strays and not not_succeeded,
        "published": once,
        "duplicates": duplicates,
        "lost": lost,
        "unfinished": sum(1 for j in everything if j.state not in FINAL_STATES),
        "strays": strays,
        "not_succeeded": [f"{j.kind} {j.id} {j.state}: {j.last_error}" for j in not_succeeded][:10],
        "by_worker": dict(sorted(by_worker.items())),
        "publish_s_p50": round(statistics.median(durations), 2) if durations else None,
        "post_s_p50": round(statistics.median(post_durations), 3) if post_durations else None,
        "peak_publishing": peak,
        "cpu_s": cpu,
        "load_1min": load,
        "graph_calls": graph_calls,
        "takeovers": sum(j.crashes for j in everything),
        "queued_late": queued_late,
    }


def run_jobs(
    mongodb_uri: str,
    workers: int,
    *,
    jobs: int = 200,
    call_latency_s: float = 0.2,
    workdir: Path,
    agents: int = 4,
    bound_s: float | None = None,
    server_pid: int | None = None,
) -> dict[str, Any]:
    """Publish ``jobs`` scheduled Instagram posts (spread over ``agents`` accounts) with
    ``workers`` ``carrier run --no-api`` processes over the MongoDB database ``mongodb_uri``
    names (a database of its own: its agents and jobs are this run's), each Graph API call
    answered after ``call_latency_s``; files go under ``workdir``.

    Returns ``workers``, ``jobs`` (posts), ``seconds`` (first post job claimed → last publish
    job ended), ``jobs_per_s`` (posts published once, per second), ``published_once`` (every
    post exactly once on its fake, nothing else published, every job succeeded),
    ``duplicates``, ``lost`` (not published; ``unfinished``: jobs still open when ``bound_s``
    passed, a guard against hanging, by default 300 s + 5 s a post), ``by_worker``
    (``{"w1": {"post": n, "publish": m}}``: who ended each job) and more: ``peak_publishing`` (the most publish jobs held at once, sampled from
    the store every 0.25 s), ``post_s_p50`` / ``publish_s_p50`` (claim → end of one job),
    ``graph_calls``, ``takeovers``, ``cpu_s`` (CPU seconds while the posts drained: each
    worker, this process — the fakes, the FTP server, the watching — and the MongoDB server
    when ``server_pid`` names its process on this machine), ``load_1min`` (the machine's load
    average before and after: others' work shows there).

    Runs its own event loop: from async code, await :func:`run_jobs_async`."""
    return asyncio.run(
        run_jobs_async(
            mongodb_uri,
            workers,
            jobs=jobs,
            call_latency_s=call_latency_s,
            workdir=workdir,
            agents=agents,
            bound_s=bound_s,
            server_pid=server_pid,
        )
    )


HEADER = (
    "| workers | posts | first claim → last publish | posts/s | most publishes at once | "
    "post / publish job p50 | once / duplicates / lost | jobs per worker (post+publish) | "
    "CPU s: workers / MongoDB / bench | load before → after |"
)


def _row(r: dict[str, Any]) -> str:
    spread = ", ".join(f"{w} {c['post']}+{c['publish']}" for w, c in r["by_worker"].items())
    cpu = r["cpu_s"]
    workers_cpu = sum(v for k, v in cpu.items() if k.startswith("w"))
    mongodb = f"{cpu['mongodb']:.0f}" if "mongodb" in cpu else "?"
    return (
        f"| {r['workers']} | {r['jobs']} | {r['seconds']:.1f} s | {r['jobs_per_s']:.2f} | "
        f"{r['peak_publishing']} | {r['post_s_p50']} s / {r['publish_s_p50']} s | "
        f"{r['published']} / {r['duplicates']} / {r['lost']} | {spread} | "
        f"{workers_cpu:.0f} / {mongodb} / {cpu['bench']:.0f} | "
        f"{r['load_1min'][0]} → {r['load_1min'][1]} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--jobs", type=int, default=200, help="posts to publish (default 200)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds a Graph API call")
    parser.add_argument("--agents", type=int, default=4, help="Instagram accounts")
    parser.add_argument("--json", action="store_true", help="also print each result as JSON")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="carrier-scale-jobs-") as tmp:
        root = Path(tmp)
        (root / "mongo").mkdir()
        with secantus_server(root / "mongo") as server:
            for workers in args.workers:
                uri = f"{server.uri}scale_jobs_{workers}w_{uuid.uuid4().hex[:8]}"
                result = run_jobs(
                    uri,
                    workers,
                    jobs=args.jobs,
                    call_latency_s=args.latency,
                    workdir=root / f"run-{workers}w",
                    agents=args.agents,
                    server_pid=server.pid,
                )
                results.append(result)
                if args.json:
                    print(json.dumps(result), flush=True)
    print(
        f"\n{args.jobs} scheduled posts over {args.agents} accounts, Graph API calls "
        f"{args.latency * 1000:.0f} ms each\n"
    )
    print(HEADER)
    print("| --- " * HEADER.count(" | ") + "| --- |")
    for result in results:
        print(_row(result))
    bad = [r for r in results if not r["published_once"]]
    for r in bad:
        print(f"\n{r['workers']} worker(s): NOT exactly once: {json.dumps(r)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
