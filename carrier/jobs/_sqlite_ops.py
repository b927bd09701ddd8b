"""The job store's SQL: the schema and the statements, each a plain function run whole on the
store's thread (see :mod:`carrier._sqlite_thread`).

Each row keeps the whole record as JSON (``data``) plus the columns that queries filter on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from carrier._sqlite_thread import immediate
from carrier.jobs import transitions as t
from carrier.jobs.errors import JobNotFound
from carrier.jobs.model import Job, JobState
from carrier.jobs.schedule import Schedule
from carrier.types import to_us

_TIME = TypeAdapter(datetime)

__all__ = [
    "HELD",
    "JOBS_MIGRATIONS",
    "JOBS_SCHEMA_VERSION",
    "advance_schedule",
    "claim",
    "delete_schedule",
    "in_",
    "insert",
    "jobs_of",
    "modify",
    "put_schedule",
    "renew",
    "select",
    "us",
]

JOBS_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: times are integer microseconds since the epoch (UTC) so comparisons are exact.
    (
        """CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            agent_id TEXT,
            state TEXT NOT NULL,
            run_at INTEGER NOT NULL,
            lease_owner TEXT,
            lease_expires_at INTEGER,
            idempotency_key TEXT UNIQUE,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX jobs_due ON jobs (state, kind, run_at)",
        "CREATE INDEX jobs_lease ON jobs (state, kind, lease_expires_at)",
        "CREATE INDEX jobs_created ON jobs (created_at)",
        "CREATE INDEX jobs_agent ON jobs (agent_id, created_at)",
        """CREATE TABLE schedules (
            name TEXT PRIMARY KEY,
            next_at INTEGER,
            data TEXT NOT NULL
        )""",
    ),
)
"""Schema steps: step ``i`` (0-based) brings the job tables to version ``i + 1``. Append only."""

JOBS_SCHEMA_VERSION = len(JOBS_MIGRATIONS)

_COLUMNS = (
    "id, kind, agent_id, state, run_at, lease_owner, lease_expires_at, idempotency_key, "
    "created_at, updated_at, data"
)
_INSERT = (
    f"INSERT OR IGNORE INTO jobs ({_COLUMNS}) VALUES ({', '.join('?' * len(_COLUMNS.split(',')))})"
)
_UPDATE = (
    "UPDATE jobs SET state = ?, run_at = ?, lease_owner = ?, lease_expires_at = ?, "
    "updated_at = ?, data = ? WHERE id = ?"
)
HELD = f"('{JobState.CLAIMED}', '{JobState.RUNNING}')"


def us(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


def _row(job: Job) -> tuple[Any, ...]:
    return (
        job.id,
        job.kind,
        job.agent_id,
        str(job.state),
        us(job.run_at),
        job.lease_owner,
        us(job.lease_expires_at),
        job.idempotency_key,
        us(job.created_at),
        us(job.updated_at),
        job.model_dump_json(),
    )


def _update_params(job: Job) -> tuple[Any, ...]:
    return (
        str(job.state),
        us(job.run_at),
        job.lease_owner,
        us(job.lease_expires_at),
        us(job.updated_at),
        job.model_dump_json(),
        job.id,
    )


def in_(values: Sequence[str]) -> str:
    return f"({', '.join('?' * len(values))})"


def jobs_of(rows: Sequence[sqlite3.Row]) -> list[Job]:
    return [Job.model_validate_json(row["data"]) for row in rows]


# -- statements ------------------------------------------------------------------------------
def insert(db: sqlite3.Connection, job: Job) -> Job:
    with immediate(db):
        if db.execute(_INSERT, _row(job)).rowcount > 0 or job.idempotency_key is None:
            return job
        row = db.execute(
            "SELECT data FROM jobs WHERE idempotency_key = ?", (job.idempotency_key,)
        ).fetchone()
    if row is None:  # pragma: no cover - the id itself collided (a caller reused one)
        raise sqlite3.IntegrityError(f"job {job.id} already exists")
    return Job.model_validate_json(row["data"])


def modify(db: sqlite3.Connection, job_id: str, change: Callable[[Job], Job]) -> Job:
    with immediate(db):
        row = db.execute("SELECT data FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        job = change(Job.model_validate_json(row["data"]))
        db.execute(_UPDATE, _update_params(job))
    return job


_RENEW = (
    "UPDATE jobs SET lease_expires_at = ?, updated_at = ?, "
    "data = json_set(data, '$.lease_expires_at', ?, '$.updated_at', ?) "
    f"WHERE id = ? AND lease_owner = ? AND state IN {HELD} RETURNING data"
)


def renew(
    db: sqlite3.Connection, job_id: str, worker_id: str, expires: datetime, now: datetime
) -> Job | None:
    """One conditional UPDATE on (id, owner, held): atomic without a transaction of its own, and
    the record's JSON changed in place exactly as the job model writes times."""
    rows = db.execute(
        _RENEW,
        (
            us(expires),
            us(now),
            _TIME.dump_python(expires, mode="json"),
            _TIME.dump_python(now, mode="json"),
            job_id,
            worker_id,
        ),
    ).fetchall()  # all of it: a statement left unfinished would keep the write lock
    return Job.model_validate_json(rows[0]["data"]) if rows else None


def claim(
    db: sqlite3.Connection,
    worker_id: str,
    kinds: list[str],
    now: datetime,
    lease_s: float,
    limit: int,
    max_active: int | None,
) -> list[Job]:
    now_us = us(now)
    with immediate(db):
        if max_active is not None:
            (active,) = db.execute(
                f"SELECT COUNT(*) FROM jobs WHERE state IN {HELD} AND kind IN {in_(kinds)} "
                "AND lease_expires_at > ?",
                [*kinds, now_us],
            ).fetchone()
            limit = min(limit, max_active - int(active))
            if limit <= 0:
                return []
        rows = db.execute(
            f"SELECT data FROM jobs WHERE kind IN {in_(kinds)} AND ("
            f"(state = '{JobState.PENDING}' AND run_at <= ?) OR "
            f"(state IN {HELD} AND lease_expires_at <= ?)"
            ") ORDER BY run_at, created_at, id LIMIT ?",
            [*kinds, now_us, now_us, limit],
        ).fetchall()
        changed = [
            t.claim(job, worker_id=worker_id, now=now, lease_s=lease_s) for job in jobs_of(rows)
        ]
        db.executemany(_UPDATE, [_update_params(job) for job in changed])
    return changed


def put_schedule(db: sqlite3.Connection, schedule: Schedule, now: datetime) -> Schedule:
    with immediate(db):
        row = db.execute("SELECT data FROM schedules WHERE name = ?", (schedule.name,)).fetchone()
        old = Schedule.model_validate_json(row["data"]) if row is not None else None
        if old is not None and old.definition() == schedule.definition():
            return old
        stored = schedule.model_copy(
            update={
                "next_at": None,
                "finished": False,
                "created_at": old.created_at if old is not None else now,
                "updated_at": now,
            }
        )
        db.execute(
            "INSERT OR REPLACE INTO schedules (name, next_at, data) VALUES (?, NULL, ?)",
            (stored.name, stored.model_dump_json()),
        )
    return stored


def advance_schedule(
    db: sqlite3.Connection,
    name: str,
    expected: datetime | None,
    next_at: datetime | None,
    finished: bool,
    now: datetime,
) -> bool:
    with immediate(db):
        row = db.execute(
            "SELECT data FROM schedules WHERE name = ? AND next_at IS ?", (name, us(expected))
        ).fetchone()
        if row is None:
            return False
        stored = Schedule.model_validate_json(row["data"]).model_copy(
            update={"next_at": next_at, "finished": finished, "updated_at": now}
        )
        db.execute(
            "UPDATE schedules SET next_at = ?, data = ? WHERE name = ?",
            (us(next_at), stored.model_dump_json(), name),
        )
    return True


def select(db: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    return db.execute(sql, params).fetchall()


def delete_schedule(db: sqlite3.Connection, name: str) -> bool:
    with immediate(db):
        return db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount > 0
