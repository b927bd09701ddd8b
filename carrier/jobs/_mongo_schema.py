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
from pymongo.errors import CollectionInvalid, OperationFailure

from carrier.errors import StoreError
from carrier.install import upgrade_hint
from carrier.jobs._mongo_codec import SLOT
from carrier.types import utcnow

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
_NAMESPACE_EXISTS = 48

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


async def stored_version(db: Database) -> int:
    """The job store's schema version recorded in the database (0 for a new one)."""
    doc = await db["meta"].find_one({"_id": SCHEMA_DOC})
    return int(doc["version"]) if doc is not None else 0


async def _create(db: Database, name: str) -> None:
    try:
        await db.create_collection(name)
    except CollectionInvalid:  # another process created it since we listed them
        pass
    except OperationFailure as exc:
        if exc.code != _NAMESPACE_EXISTS:
            raise


async def migrate(db: Database, where: str) -> None:
    """Bring the database to :data:`JOBS_SCHEMA_VERSION`; refuse one written by a newer Carrier."""
    current = await stored_version(db)
    if current > JOBS_SCHEMA_VERSION:
        raise StoreError(
            f"the MongoDB job store {where} has schema version {current}, newer than this "
            f"Carrier supports ({JOBS_SCHEMA_VERSION}); {upgrade_hint()} "
            "or point CARRIER_MONGODB_URI at another database"
        )
    for version in range(current + 1, JOBS_SCHEMA_VERSION + 1):
        await MIGRATIONS[version - 1](db)
    existing = set(await db.list_collection_names())
    for name, indexes in INDEXES.items():
        if name not in existing:
            await _create(db, name)
        if indexes:
            await db[name].create_indexes(list(indexes))
    if current < JOBS_SCHEMA_VERSION:
        await db["meta"].update_one(
            {"_id": SCHEMA_DOC},
            {"$max": {"version": JOBS_SCHEMA_VERSION}, "$set": {"applied_at": utcnow()}},
            upsert=True,
        )
        logger.info(
            "MongoDB job store %s migrated to schema version %d", where, JOBS_SCHEMA_VERSION
        )
