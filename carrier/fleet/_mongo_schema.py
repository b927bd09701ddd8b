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

from carrier._mongo_schema import MongoSchema

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


SCHEMA = MongoSchema(
    doc=SCHEMA_DOC, store="MongoDB fleet store", migrations=MIGRATIONS, indexes=INDEXES
)
stored_version = SCHEMA.stored_version


async def migrate(db: Database, where: str) -> None:
    """Bring the database to :data:`FLEET_SCHEMA_VERSION`; refuse one a newer Carrier wrote."""
    await SCHEMA.migrate(db, where, logger=logger)
