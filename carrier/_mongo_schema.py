"""A versioned layout of collections in a MongoDB database, shared by the job store, the audit
log and the fleet (the memory store keeps its own, with feature detection).

Each keeps its schema version as its own document in the shared ``meta`` collection (``{_id:
"<name>_schema", version: N}``). Opening runs the data migrations a database lacks, makes sure
every collection and index exists (idempotent: two processes may open one new database at once),
then records the version with ``$max`` so that it never goes down. A database a newer Carrier
wrote is refused, with how to upgrade::

    SCHEMA = MongoSchema(doc="jobs_schema", store="MongoDB job store", migrations=MIGRATIONS,
                         indexes={"jobs": (...), "schedules": (...)})
    await SCHEMA.migrate(db, where)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pymongo import IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import CollectionInvalid, OperationFailure

from carrier.errors import StoreError
from carrier.install import upgrade_hint
from carrier.types import utcnow

__all__ = ["Database", "Migration", "MongoSchema"]

log = logging.getLogger(__name__)

Database = AsyncDatabase[dict[str, Any]]
Migration = Callable[[Database], Awaitable[None]]

_NAMESPACE_EXISTS = 48


@dataclass(frozen=True)
class MongoSchema:
    doc: str
    """The ``meta`` document's ``_id`` (``jobs_schema``)."""
    store: str
    """How messages name the store (``MongoDB job store``)."""
    migrations: tuple[Migration, ...]
    """Step ``i`` (0-based) brings a database to version ``i + 1``. Append only."""
    indexes: Mapping[str, Sequence[IndexModel]]
    """Every collection of the layout, with its indexes."""

    @property
    def version(self) -> int:
        return len(self.migrations)

    async def stored_version(self, db: Database) -> int:
        """The version recorded in the database (0 for a new one)."""
        found = await db["meta"].find_one({"_id": self.doc})
        return int(found["version"]) if found is not None else 0

    async def migrate(self, db: Database, where: str, *, logger: logging.Logger = log) -> None:
        """Bring the database to :attr:`version`; refuse one a newer Carrier wrote."""
        current = await self.stored_version(db)
        if current > self.version:
            raise StoreError(
                f"the {self.store} {where} has schema version {current}, newer than this "
                f"Carrier supports ({self.version}); {upgrade_hint()} "
                "or point CARRIER_MONGODB_URI at another database"
            )
        for version in range(current + 1, self.version + 1):
            await self.migrations[version - 1](db)
        existing = set(await db.list_collection_names())
        for name, indexes in self.indexes.items():
            if name not in existing:
                await _create(db, name)
            if indexes:
                await db[name].create_indexes(list(indexes))
        if current < self.version:
            await db["meta"].update_one(
                {"_id": self.doc},
                {"$max": {"version": self.version}, "$set": {"applied_at": utcnow()}},
                upsert=True,
            )
            logger.info("%s %s migrated to schema version %d", self.store, where, self.version)


async def _create(db: Database, name: str) -> None:
    try:
        await db.create_collection(name)
    except CollectionInvalid:  # another process created it since we listed them
        pass
    except OperationFailure as exc:
        if exc.code != _NAMESPACE_EXISTS:
            raise
