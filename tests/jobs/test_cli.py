"""``carrier jobs ...``: the typer sub-app over the job store in the data dir."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carrier.cli.jobs import jobs_app
from carrier.jobs import Job, JobState, SQLiteJobStore
from carrier.jobs.errors import JobNotFound


@pytest.fixture
def db() -> Path:
    # The autouse fixture in tests/conftest.py points CARRIER_DATA_DIR at a fresh directory.
    return Path(os.environ["CARRIER_DATA_DIR"]) / "carrier.db"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(jobs_app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.output


def setup(db: Path) -> dict[str, Job]:
    async def fill() -> dict[str, Job]:
        async with SQLiteJobStore(path=db) as store:
            pending = await store.enqueue("digest", agent_id="ada")
            post = await store.enqueue("instagram.publish", payload={"media": "m1"})
            [claimed] = await store.claim("w1", ["instagram.publish"], lease_s=60)
            waiting = await store.await_approval(
                claimed.id, "w1", reason="caption drafted", payload={"caption": "hello"}
            )
            await store.enqueue("broken", max_attempts=1)
            [b] = await store.claim("w1", ["broken"], lease_s=60)
            failed = await store.fail(b.id, "w1", error="ValueError: bad media", retry_at=None)
            assert post.id == waiting.id
            return {"pending": pending, "waiting": waiting, "failed": failed}

    return asyncio.run(fill())


def stored(db: Path, job_id: str) -> Job:
    async def get() -> Job:
        async with SQLiteJobStore(path=db) as store:
            job = await store.get(job_id)
            if job is None:
                raise JobNotFound(job_id)
            return job

    return asyncio.run(get())


def test_list_and_filters(db: Path) -> None:
    jobs = setup(db)
    code, out = run("list")
    assert code == 0
    for job in jobs.values():
        assert job.id in out
    assert "awaiting_approval" in out and "ValueError: bad media" in out
    code, out = run("list", "--state", "failed")
    assert jobs["failed"].id in out and jobs["pending"].id not in out
    code, out = run("list", "--agent", "ada")
    assert jobs["pending"].id in out and jobs["failed"].id not in out
    code, out = run("list", "--kind", "nothing")
    assert (code, out.strip()) == (0, "no jobs")
    code, out = run("list", "--state", "bogus")
    assert code == 2 and "not a job state" in out


def test_show_prints_fields_payload_and_history(db: Path) -> None:
    jobs = setup(db)
    code, out = run("show", jobs["waiting"].id)
    assert code == 0
    assert '"caption": "hello"' in out and "caption drafted" in out and "history" in out
    code, out = run("show", "nope")
    assert code == 1 and "no job with id 'nope'" in out


def test_show_counts_crashes_apart_from_attempts(db: Path) -> None:
    async def crashed() -> Job:
        async with SQLiteJobStore(path=db) as store:
            job = await store.enqueue("instagram.publish", max_attempts=5)
            [held] = await store.claim("dead", ["instagram.publish"], lease_s=60)
            later = held.created_at + timedelta(seconds=61)
            await store.claim("w2", ["instagram.publish"], lease_s=60, now=later)
            return await store.checkpoint(
                job.id, "w2", progress={"media_id": "m1"}, committed=True, now=later
            )

    job = asyncio.run(crashed())
    code, out = run("show", job.id)
    assert code == 0
    assert "1/5" in out and "1/10 (taken over from a lost worker" in out
    assert '"media_id": "m1"' in out and "committed" in out


def test_approve_with_edits_then_reject_is_refused(db: Path) -> None:
    jobs = setup(db)
    job_id = jobs["waiting"].id
    code, out = run(
        "approve", job_id, "--set", "caption=Final words", "--set", "n=3", "--by", "ann"
    )
    assert code == 0 and "pending" in out
    approved = stored(db, job_id)
    assert approved.payload == {"media": "m1", "caption": "Final words", "n": 3}
    assert approved.approved
    code, out = run("reject", job_id)
    assert code == 1 and "not awaiting approval" in out


def test_approve_with_a_whole_payload_and_bad_input(db: Path) -> None:
    jobs = setup(db)
    job_id = jobs["waiting"].id
    assert run("approve", job_id, "--payload", "[1]")[0] == 2
    assert run("approve", job_id, "--set", "no-equals")[0] == 2
    assert run("approve", job_id, "--payload", '{"caption": "x"}')[0] == 0
    assert stored(db, job_id).payload == {"caption": "x"}


def test_reject_cancel_retry(db: Path) -> None:
    jobs = setup(db)
    code, out = run("reject", jobs["waiting"].id, "--reason", "off brand")
    assert code == 0 and "rejected: off brand" in out
    code, out = run("cancel", jobs["pending"].id, "--reason", "not needed")
    assert code == 0 and stored(db, jobs["pending"].id).state is JobState.CANCELLED
    code, out = run("cancel", jobs["pending"].id)
    assert code == 1 and "already finished" in out
    code, out = run("retry", jobs["failed"].id)
    assert code == 0 and stored(db, jobs["failed"].id).state is JobState.PENDING


def test_schedules_listing(db: Path) -> None:
    from carrier.jobs import CronSpec, IntervalSpec, Schedule

    async def fill() -> None:
        async with SQLiteJobStore(path=db) as store:
            await store.put_schedule(Schedule(name="ig", kind="post", spec=IntervalSpec(min_s=60)))
            await store.put_schedule(
                Schedule(name="digest", kind="digest", spec=CronSpec(expr="0 9 * * *"))
            )

    assert run("schedules") == (0, "no schedules\n")
    asyncio.run(fill())
    code, out = run("schedules")
    assert code == 0 and "cron '0 9 * * *' (UTC)" in out and "every 1m" in out
