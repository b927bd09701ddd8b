"""SQLiteJobStore: jobs and schedules in one SQLite file (WAL), safe across processes.

It may share the main store's file (``<data_dir>/carrier.db``): it keeps its own connection, its
own tables (``jobs``, ``schedules``) and its own schema version table (``jobs_schema_version``).
Every change runs in a ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock first,
so a claim in one process and a claim in another are serialized and never hand out one job twice.
Each call runs whole on the store's own thread (see :mod:`carrier._sqlite_thread`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from carrier._sqlite_thread import SQLiteThread
from carrier.jobs import _sqlite_ops as ops
from carrier.jobs._sqlite_ops import JOBS_MIGRATIONS, JOBS_SCHEMA_VERSION
from carrier.jobs.base import JobStore
from carrier.jobs.clock import Clock, system_clock
from carrier.jobs.model import Job, JobState
from carrier.jobs.schedule import Schedule

__all__ = ["JOBS_MIGRATIONS", "JOBS_SCHEMA_VERSION", "SQLiteJobStore"]

logger = logging.getLogger(__name__)


class SQLiteJobStore(JobStore):
    """The JobStore in a SQLite file. Usage::

    async with SQLiteJobStore(path=settings.data_dir / "carrier.db") as jobs:
        await jobs.enqueue("digest", agent_id=agent.id)
    """

    def __init__(self, *, path: str | Path, clock: Clock = system_clock) -> None:
        super().__init__(clock=clock)
        self.path = Path(path).expanduser()
        self._thread = SQLiteThread(
            path=self.path,
            version_table="jobs_schema_version",
            migrations=JOBS_MIGRATIONS,
            stamp=lambda: self.clock().isoformat(),
            name="job store",
            tables="job tables",
            opener="SQLiteJobStore",
            logger=logging.getLogger("carrier.jobs.sqlite"),
        )

    def __repr__(self) -> str:
        return f"SQLiteJobStore(path={str(self.path)!r})"

    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    async def schema_version(self) -> int:
        rows = await self._thread.run(
            "reading the schema version", ops.select, "SELECT MAX(version) FROM jobs_schema_version"
        )
        return int(rows[0][0] or 0)

    # -- jobs ------------------------------------------------------------------------------
    async def _insert(self, job: Job) -> Job:
        return await self._thread.run(f"enqueueing a {job.kind} job", ops.insert, job)

    async def _modify(self, job_id: str, change: Callable[[Job], Job]) -> Job:
        return await self._thread.run(f"updating job {job_id}", ops.modify, job_id, change)

    async def _renew(
        self, job_id: str, worker_id: str, *, expires: datetime, now: datetime
    ) -> Job | None:
        return await self._thread.run(
            f"renewing the lease of job {job_id}", ops.renew, job_id, worker_id, expires, now
        )

    async def get(self, job_id: str) -> Job | None:
        rows = await self._thread.run(
            f"reading job {job_id}", ops.select, "SELECT data FROM jobs WHERE id = ?", (job_id,)
        )
        return Job.model_validate_json(rows[0]["data"]) if rows else None

    async def list_jobs(
        self,
        *,
        states: Sequence[JobState] | None = None,
        kind: str | None = None,
        agent_id: str | None = None,
        limit: int | None = 100,
    ) -> list[Job]:
        where: list[str] = ["1"]
        params: list[Any] = []
        if states is not None:
            where.append(f"state IN {ops.in_(states)}")
            params += [str(s) for s in states]
        for column, value in (("kind", kind), ("agent_id", agent_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = await self._thread.run(
            "listing jobs",
            ops.select,
            f"SELECT data FROM jobs WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?",
            [*params, -1 if limit is None else max(limit, 0)],
        )
        return ops.jobs_of(rows)

    async def claim(
        self,
        worker_id: str,
        kinds: Sequence[str],
        *,
        lease_s: float,
        limit: int = 1,
        max_active: int | None = None,
        now: datetime | None = None,
    ) -> list[Job]:
        at = self._now(now)
        if not kinds or limit <= 0:
            return []
        changed = await self._thread.run(
            f"claiming {', '.join(kinds)} jobs",
            ops.claim,
            worker_id,
            list(kinds),
            at,
            lease_s,
            limit,
            max_active,
        )
        for job in changed:
            if job.state is not JobState.CLAIMED:  # lost past its crash budget
                logger.warning("job %s (%s) %s: %s", job.id, job.kind, job.state, job.last_error)
        return [job for job in changed if job.state is JobState.CLAIMED]

    async def count_active(self, kind: str, *, now: datetime | None = None) -> int:
        rows = await self._thread.run(
            f"counting active {kind} jobs",
            ops.select,
            f"SELECT COUNT(*) FROM jobs WHERE state IN {ops.HELD} AND kind = ? "
            "AND lease_expires_at > ?",
            (kind, ops.us(self._now(now))),
        )
        return int(rows[0][0])

    # -- schedules -------------------------------------------------------------------------
    async def put_schedule(self, schedule: Schedule) -> Schedule:
        return await self._thread.run(
            f"saving schedule {schedule.name!r}", ops.put_schedule, schedule, self.clock()
        )

    async def get_schedule(self, name: str) -> Schedule | None:
        rows = await self._thread.run(
            f"reading schedule {name!r}",
            ops.select,
            "SELECT data FROM schedules WHERE name = ?",
            (name,),
        )
        return Schedule.model_validate_json(rows[0]["data"]) if rows else None

    async def list_schedules(self) -> list[Schedule]:
        rows = await self._thread.run(
            "listing schedules", ops.select, "SELECT data FROM schedules ORDER BY name"
        )
        return [Schedule.model_validate_json(row["data"]) for row in rows]

    async def delete_schedule(self, name: str) -> bool:
        return await self._thread.run(f"deleting schedule {name!r}", ops.delete_schedule, name)

    async def advance_schedule(
        self,
        name: str,
        *,
        expected: datetime | None,
        next_at: datetime | None,
        finished: bool = False,
        now: datetime | None = None,
    ) -> bool:
        return await self._thread.run(
            f"advancing schedule {name!r}",
            ops.advance_schedule,
            name,
            expected,
            next_at,
            finished,
            self._now(now),
        )
