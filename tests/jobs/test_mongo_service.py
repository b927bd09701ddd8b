"""JobService.from_settings: jobs go where the memory store goes (CARRIER_MONGODB_URI or SQLite)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.jobs import Job, JobContext, JobState, OnceSpec, Schedule, SQLiteJobStore
from carrier.jobs.mongo import MongoJobStore
from carrier.jobs.service import JobService
from carrier.settings import load_settings
from tests.jobs.conftest import T0, MongoJobFactory


async def test_from_settings_without_a_mongodb_uri_uses_the_data_dir(tmp_path: Path) -> None:
    settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path)})
    service = JobService.from_settings(settings, poll_s=0.5)
    assert isinstance(service.store, SQLiteJobStore)
    assert service.store.path == tmp_path / "carrier.db"
    assert service.worker.poll_s == 0.5


async def test_from_settings_with_a_mongodb_uri_runs_jobs_in_mongodb(
    mongo_job_factory: MongoJobFactory,
) -> None:
    settings = load_settings({"CARRIER_MONGODB_URI": mongo_job_factory.uri})
    done = asyncio.Event()

    async def announce(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        done.set()
        return {"said": job.payload["text"]}

    service = JobService.from_settings(settings, poll_s=0.01)
    assert isinstance(service.store, MongoJobStore)
    assert service.store.database == mongo_job_factory.database
    service.worker.register("announce", announce)
    async with service:
        await service.scheduler.add(
            Schedule(name="hello", kind="announce", payload={"text": "hi"}, spec=OnceSpec(at=T0))
        )
        await service.scheduler.tick()
        service.worker.notify()
        await done.wait()
        await service.worker.join()
        [job] = await service.store.list_jobs()
        assert (job.state, job.result) == (JobState.SUCCEEDED, {"said": "hi"})
    assert not service.running
