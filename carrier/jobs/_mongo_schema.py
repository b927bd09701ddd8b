"""Collections, indexes and schema version of the MongoDB job store (internal).

The job store may share a database with the MongoDB memory store (one ``CARRIER_MONGODB_URI``):
its collections (``jobs``, ``schedules``) are its own, and its schema version is its own document
in the shared ``meta`` collection (``{_id: "jobs_schema", version: N}``), as the SQLite job store
keeps its own version table in a shared file. Opening runs the data migrations a database lacks,
makes sure every collection and index exists (idempotent: two processes may open one new database
at once), then records the version with ``$max`` so that it never goes down.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from carrier._mongo_schema import MongoSchema
from carrier.jobs._mongo_codec import SLOT

__all__ = [
    "INDEXES",
    "JOBS_SCHEMA_VERSION",
    "MIGRATIONS",
    "SCHEMA_DOC",
    "migrate",
    "stored_version",
]

logger = logging.getLogger(__name__)

Database = AsyncDatabase[dict[str, Any]]

_IF_STRING = {"$type": "string"}

INDEXES: dict[str, tuple[IndexModel, ...]] = {
    "jobs": (
        # Claiming: due pending jobs, oldest due first.
        IndexModel(
            [("state", ASCENDING), ("kind", ASCENDING), ("run_us", ASCENDING)], name="jobs_due"
        ),
        # Claiming expired leases, counting live ones.
        IndexModel(
            [("state", ASCENDING), ("kind", ASCENDING), ("lease_expires_us", ASCENDING)],
            name="jobs_lease",
        ),
        IndexModel([("created_us", DESCENDING), ("seq", DESCENDING)], name="jobs_created"),
        IndexModel([("kind", ASCENDING), ("created_us", DESCENDING)], name="jobs_kind"),
        IndexModel([("agent_id", ASCENDING), ("created_us", DESCENDING)], name="jobs_agent"),
        # Partial: any number of jobs without a key (stored as null).
        IndexModel(
            [("idempotency_key", ASCENDING)],
            name="jobs_idempotency_key",
            unique=True,
            partialFilterExpression={"idempotency_key": _IF_STRING},
        ),
        IndexModel(
            [(SLOT, ASCENDING)],
            name="jobs_slot",
            unique=True,
            partialFilterExpression={SLOT: _IF_STRING},
        ),
    ),
    "schedules": (),
    "meta": (),
}
"""Every collection of the job store with its indexes (``_id`` is always indexed)."""

Migration = Callable[[Database], Awaitable[None]]


async def _initial(db: Database) -> None:
    """1: the initial layout; the collections and indexes in :data:`INDEXES` are all of it."""


async def _crash_budget(db: Database) -> None:
    """2: crashes are counted apart from attempts: every job gets ``crashes`` and
    ``max_crashes``, which the claim filters compare (a missing field would read as a job out
    of budget)."""
    for name, value in (("crashes", 0), ("max_crashes", 10)):
        await db["jobs"].update_many(
            {name: {"$exists": False}}, {"$set": {name: value}, "$inc": {"v": 1}}
        )


MIGRATIONS: tuple[Migration, ...] = (_initial, _crash_budget)
"""Data migrations: step ``i`` (0-based) brings a database to version ``i + 1``. Append only."""

JOBS_SCHEMA_VERSION = len(MIGRATIONS)

SCHEMA_DOC = "jobs_schema"


SCHEMA = MongoSchema(
    doc=SCHEMA_DOC, store="MongoDB job store", migrations=MIGRATIONS, indexes=INDEXES
)
stored_version = SCHEMA.stored_version


async def migrate(db: Database, where: str) -> None:
    """Bring the database to :data:`JOBS_SCHEMA_VERSION`; refuse one written by a newer Carrier."""
    await SCHEMA.migrate(db, where, logger=logger)
