"""Collections, indexes and schema version of the MongoDB fleet store (internal).

The fleet shares the memory store's database (one ``CARRIER_MONGODB_URI``): its collections
(``fleet_*``) are its own, and its schema version is its own document in the shared ``meta``
collection (``{_id: "fleet_schema", version: N}``), as the SQLite fleet keeps its own version
table in a shared file. Opening runs the data migrations a database lacks, makes sure every
collection and index exists (idempotent: two processes may open one new database at once), then
records the version with ``$max`` so that it never goes down.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import CollectionInvalid, OperationFailure

from carrier.errors import StoreError
from carrier.install import upgrade_hint
from carrier.types import utcnow

__all__ = [
    "CHANGES",
    "DESIRED",
    "FLEET_SCHEMA_VERSION",
    "IMPORTS",
    "INDEXES",
    "LEASES",
    "REVISIONS",
    "SCHEMA_DOC",
    "migrate",
    "stored_version",
]

logger = logging.getLogger(__name__)

Database = AsyncDatabase[dict[str, Any]]

REVISIONS = "fleet_revisions"
"""One document per revision; ``(agent_id, number)`` is unique, which numbers them."""
DESIRED = "fleet_desired"
"""``_id``: the agent's id."""
IMPORTS = "fleet_imports"
"""``_id``: the agent's id."""
CHANGES = "fleet_changes"
"""``_id``: the entry's ``seq`` (unique by being the id)."""
LEASES = "fleet_leases"
"""``_id``: the lease's name."""

_NAMESPACE_EXISTS = 48

INDEXES: dict[str, tuple[IndexModel, ...]] = {
    REVISIONS: (
        IndexModel(
            [("agent_id", ASCENDING), ("number", ASCENDING)],
            name="fleet_revisions_number",
            unique=True,
        ),
    ),
    DESIRED: (),
    IMPORTS: (),
    CHANGES: (IndexModel([("at_us", ASCENDING)], name="fleet_changes_at"),),
    LEASES: (),
    "meta": (),
}
"""Every collection of the fleet store with its indexes (``_id`` is always indexed)."""

Migration = Callable[[Database], Awaitable[None]]


async def _initial(db: Database) -> None:
    """1: the initial layout; the collections and indexes in :data:`INDEXES` are all of it."""


MIGRATIONS: tuple[Migration, ...] = (_initial,)
"""Data migrations: step ``i`` (0-based) brings a database to version ``i + 1``. Append only."""

FLEET_SCHEMA_VERSION = len(MIGRATIONS)

SCHEMA_DOC = "fleet_schema"


async def stored_version(db: Database) -> int:
    """The fleet's schema version recorded in the database (0 for a new one)."""
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
    """Bring the database to :data:`FLEET_SCHEMA_VERSION`; refuse one a newer Carrier wrote."""
    current = await stored_version(db)
    if current > FLEET_SCHEMA_VERSION:
        raise StoreError(
            f"the MongoDB fleet store {where} has schema version {current}, newer than this "
            f"Carrier supports ({FLEET_SCHEMA_VERSION}); {upgrade_hint()} "
            "or point CARRIER_MONGODB_URI at another database"
        )
    for version in range(current + 1, FLEET_SCHEMA_VERSION + 1):
        await MIGRATIONS[version - 1](db)
    existing = set(await db.list_collection_names())
    for name, indexes in INDEXES.items():
        if name not in existing:
            await _create(db, name)
        if indexes:
            await db[name].create_indexes(list(indexes))
    if current < FLEET_SCHEMA_VERSION:
        await db["meta"].update_one(
            {"_id": SCHEMA_DOC},
            {"$max": {"version": FLEET_SCHEMA_VERSION}, "$set": {"applied_at": utcnow()}},
            upsert=True,
        )
        logger.info(
            "MongoDB fleet store %s migrated to schema version %d", where, FLEET_SCHEMA_VERSION
        )
