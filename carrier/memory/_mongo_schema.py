"""Collections, indexes, schema version and feature detection of the MongoDB store (internal).

The schema version lives in the ``meta`` collection (``{_id: "schema", version: N}``). Opening a
database runs the data migrations it lacks, then makes sure every collection and index of this
version exists (both idempotent, so two processes may open one new database at once), then records
the version with ``$max`` so that it never goes down.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from pymongo import ASCENDING, DESCENDING, TEXT, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import CollectionInvalid, OperationFailure

from carrier.errors import StoreError
from carrier.install import upgrade_hint
from carrier.types import utcnow

__all__ = [
    "CHANGES_TTL_S",
    "COLLECTIONS",
    "INDEXES",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "detect_text_search",
    "detect_vector_search",
    "migrate",
    "stored_version",
]

logger = logging.getLogger(__name__)

Database = AsyncDatabase[dict[str, Any]]

CHANGES_TTL_S = 7 * 86_400
"""How long the change log keeps an entry (a process idle for longer reloads its vectors)."""

INDEXES: dict[str, tuple[IndexModel, ...]] = {
    "agents": (),
    "rooms": (IndexModel([("agent_id", ASCENDING)], name="rooms_agent"),),
    "entities": (IndexModel([("agent_id", ASCENDING)], name="entities_agent"),),
    "participants": (
        IndexModel(
            [("room_id", ASCENDING), ("entity_id", ASCENDING)],
            name="participants_room_entity",
            unique=True,
        ),
        IndexModel([("entity_id", ASCENDING)], name="participants_entity"),
    ),
    "room_states": (
        IndexModel(
            [("agent_id", ASCENDING), ("room_id", ASCENDING)],
            name="room_states_agent_room",
            unique=True,
        ),
    ),
    "memories": (
        IndexModel(
            [("agent_id", ASCENDING), ("room_id", ASCENDING), ("created_us", DESCENDING)],
            name="memories_room",
        ),
        IndexModel(
            [("agent_id", ASCENDING), ("entity_id", ASCENDING), ("created_us", DESCENDING)],
            name="memories_entity",
        ),
        IndexModel(
            [("agent_id", ASCENDING), ("kind", ASCENDING), ("created_us", DESCENDING)],
            name="memories_kind",
        ),
        # What a turn reads: a room's (or a person's) latest memories of one kind.
        IndexModel(
            [
                ("agent_id", ASCENDING),
                ("room_id", ASCENDING),
                ("kind", ASCENDING),
                ("created_us", DESCENDING),
            ],
            name="memories_room_kind",
        ),
        IndexModel(
            [
                ("agent_id", ASCENDING),
                ("entity_id", ASCENDING),
                ("kind", ASCENDING),
                ("created_us", DESCENDING),
            ],
            name="memories_entity_kind",
        ),
        IndexModel([("status", ASCENDING)], name="memories_status"),
        # The candidate filter of an exact vector search.
        IndexModel(
            [("agent_id", ASCENDING), ("embedding_model", ASCENDING), ("embedding_dim", ASCENDING)],
            name="memories_embedding",
        ),
        # Loading an agent's vectors into the in-process index, in insertion order.
        IndexModel(
            [
                ("agent_id", ASCENDING),
                ("embedding_model", ASCENDING),
                ("embedding_dim", ASCENDING),
                ("seq", ASCENDING),
            ],
            name="memories_vectors",
        ),
    ),
    # What a process changed or deleted, for the other processes' in-process vector indexes
    # (MongoStore._poll_changes); each entry expires after CHANGES_TTL_S.
    "memory_changes": (
        IndexModel([("agent_id", ASCENDING), ("_id", ASCENDING)], name="memory_changes_agent"),
        IndexModel(
            [("at", ASCENDING)], name="memory_changes_ttl", expireAfterSeconds=CHANGES_TTL_S
        ),
    ),
    "settings": (),
    "meta": (),
}
"""Every collection of the current schema with its indexes (``_id`` is always indexed)."""

COLLECTIONS = tuple(INDEXES)

Migration = Callable[[Database], Awaitable[None]]


async def _initial(db: Database) -> None:
    """1: the initial layout; the collections and indexes in :data:`INDEXES` are all of it."""


async def _recall(db: Database) -> None:
    """2: the ``memories_vectors`` index (in :data:`INDEXES`) and, where the server has text
    indexes, ``memories_text`` (made by :func:`detect_text_search` on every open)."""


async def _changes(db: Database) -> None:
    """3: the ``memory_changes`` log (in :data:`INDEXES`), through which other processes' vector
    indexes learn of updated and deleted memories."""


MIGRATIONS: tuple[Migration, ...] = (_initial, _recall, _changes)
"""Data migrations: step ``i`` (0-based) brings a database to version ``i + 1``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)

_SCHEMA_DOC = "schema"


async def stored_version(db: Database) -> int:
    """The schema version recorded in the database (0 for a new one)."""
    doc = await db["meta"].find_one({"_id": _SCHEMA_DOC})
    return int(doc["version"]) if doc is not None else 0


async def migrate(db: Database, where: str) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`; refuse one written by a newer Carrier."""
    current = await stored_version(db)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"the MongoDB store {where} has schema version {current}, newer than this Carrier "
            f"supports ({SCHEMA_VERSION}); {upgrade_hint()} or point "
            "CARRIER_MONGODB_URI at another database"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        await MIGRATIONS[version - 1](db)
    await _ensure_collections(db)
    if current < SCHEMA_VERSION:
        await db["meta"].update_one(
            {"_id": _SCHEMA_DOC},
            {"$max": {"version": SCHEMA_VERSION}, "$set": {"applied_at": utcnow()}},
            upsert=True,
        )
        logger.info("MongoDB store %s migrated to schema version %d", where, SCHEMA_VERSION)


async def _ensure_collections(db: Database) -> None:
    existing = set(await db.list_collection_names())
    for name, indexes in INDEXES.items():
        if name not in existing:
            with suppress(CollectionInvalid):  # another process created it just now
                await db.create_collection(name)
        if indexes:
            await db[name].create_indexes(list(indexes))


async def detect_vector_search(db: Database) -> bool:
    """Whether the server runs ``$vectorSearch`` (Atlas, or mongod with mongot); never assumed.

    Community mongod and most compatible servers reject ``$listSearchIndexes``; a server that
    accepts it (some compatible servers fake search indexes) must also accept a ``$vectorSearch``
    stage. On Atlas, a ``$vectorSearch`` over an index that does not exist returns no documents
    rather than an error, so the probe below is cheap there too.
    """
    memories = db["memories"]
    try:
        await (await memories.aggregate([{"$listSearchIndexes": {}}])).to_list()
        probe = {
            "$vectorSearch": {
                "index": "carrier-capability-probe",
                "path": "embedding",
                "queryVector": [1.0],
                "numCandidates": 1,
                "limit": 1,
            }
        }
        await (await memories.aggregate([probe])).to_list()
    except OperationFailure as exc:
        logger.debug("no $vectorSearch on this MongoDB server: %s", exc)
        return False
    return True


TEXT_INDEX = "memories_text"


async def detect_text_search(db: Database) -> bool:
    """Make the text index of memories' text if it is missing; whether the server has one.

    MongoDB has had text indexes forever; some compatible servers (SecantusDB) refuse them, and
    the store then ranks text matches itself (``_mongo_search.text_hits``).
    """
    try:
        await db["memories"].create_index(
            [("content.text", TEXT)], name=TEXT_INDEX, default_language="english"
        )
    except OperationFailure as exc:
        logger.debug("no text index on this MongoDB server: %s", exc)
        return False
    return True
