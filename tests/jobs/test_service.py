"""JobService: store, worker and scheduler started and stopped together (``carrier run``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carrier.jobs import Job, JobContext, JobState, OnceSpec, Schedule
from carrier.jobs.service import JobService
from tests.jobs.conftest import T0


async def test_service_runs_scheduled_jobs_and_stops_cleanly(tmp_path: Path) -> None:
    done = asyncio.Event()

    async def announce(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        done.set()
        return {"said": job.payload["text"]}

    service = JobService.sqlite(tmp_path / "carrier.db", poll_s=0.01)
    service.worker.register("announce", announce)
    async with service:
        assert service.running
        # A one-off time in the past: due at once (the real clock drives this service).
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
    await service.stop()  # twice is fine
