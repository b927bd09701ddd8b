"""MongoAuditLog: the audit log as a collection of the MongoDB database the store uses.

It may share the memory store's and the job store's database (one ``CARRIER_MONGODB_URI``): its
collection (``audit``) is its own, and its schema version is its own document in the shared
``meta`` collection (``{_id: "audit_schema", version: N}``), as the SQLite log keeps its own
version table in a shared file. A document holds the indexed fields (``at_us``, ``kind``,
``actor``, ``agent_id``) and the whole event as JSON (``data``), so a detail's keys never meet
MongoDB's rules for field names. This class offers no update and no delete but by age; a MongoDB
user that cannot update or remove in ``audit`` (a custom role) makes that hold against anyone
else with the URI too.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, IndexModel
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier._mongo_schema import MongoSchema
from carrier.audit.base import AuditLog
from carrier.audit.model import AuditEvent, AuditFilter, micros

__all__ = ["AUDIT_SCHEMA_VERSION", "COLLECTION", "MongoAuditLog"]

log = logging.getLogger(__name__)

Document = dict[str, Any]

COLLECTION = "audit"
SCHEMA_DOC = "audit_schema"

INDEXES = (
    IndexModel([("at_us", DESCENDING), ("_id", DESCENDING)], name="audit_at"),
    IndexModel([("agent_id", ASCENDING), ("at_us", DESCENDING)], name="audit_agent"),
    IndexModel([("kind", ASCENDING), ("at_us", DESCENDING)], name="audit_kind"),
    IndexModel([("actor", ASCENDING), ("at_us", DESCENDING)], name="audit_actor"),
)


STORE = "MongoDB audit log"
"""How errors name this store."""


async def _initial(db: AsyncDatabase[Document]) -> None:
    """1: the ``audit`` collection and its indexes (the layout is all of it)."""


SCHEMA = MongoSchema(
    doc=SCHEMA_DOC,
    store=STORE,
    migrations=(_initial,),
    indexes={COLLECTION: INDEXES},
)
AUDIT_SCHEMA_VERSION = SCHEMA.version


class MongoAuditLog(AuditLog):
    """The audit log in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`, made anew by a later :meth:`open`).
    """

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        handle: MongoHandle | None = None,
    ) -> None:
        super().__init__()
        if handle is None:
            if client is None:
                raise TypeError("MongoAuditLog needs a client (or use MongoAuditLog.from_url)")
            handle = MongoHandle(client, database, store=STORE, opener="MongoAuditLog")
        self._mongo = handle

    def __repr__(self) -> str:
        return f"MongoAuditLog({self._mongo.where!r})"

    @property
    def database(self) -> str:
        return self._mongo.database

    @classmethod
    def from_url(cls, url: str) -> MongoAuditLog:
        """A log from a MongoDB URI; the database is the URI's path (default ``carrier``).
        Nothing is connected until :meth:`open`."""
        return cls(
            handle=MongoHandle.from_url(
                url, appname="carrier-audit", store=STORE, opener="MongoAuditLog"
            )
        )

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        await self._mongo.open(self._migrate)

    async def close(self) -> None:
        await self._mongo.close()

    async def schema_version(self) -> int:
        with self._errors("reading the schema version"):
            doc = await self._mongo.db()["meta"].find_one({"_id": SCHEMA_DOC})
        return int(doc["version"]) if doc is not None else 0

    # -- primitives ------------------------------------------------------------------------
    async def _insert(self, event: AuditEvent) -> None:
        doc = {
            "_id": event.id,
            "at_us": micros(event.at),
            "kind": event.kind,
            "actor": event.actor,
            "agent_id": event.agent_id,
            "data": event.model_dump_json(),
        }
        with self._errors(f"recording a {event.kind} event"):
            await self._events().insert_one(doc)

    async def _select(
        self, where: AuditFilter, *, after: tuple[int, str] | None, limit: int
    ) -> list[AuditEvent]:
        query: Document = {}
        for name, value in (("agent_id", where.agent_id), ("actor", where.actor)):
            if value is not None:
                query[name] = value
        if where.kinds:
            query["kind"] = {"$in": list(where.kinds)}
        at: Document = {}
        if where.since is not None:
            at["$gte"] = micros(where.since)
        if where.until is not None:
            at["$lt"] = micros(where.until)
        if at:
            query["at_us"] = at
        if after is not None:
            query["$or"] = [
                {"at_us": {"$lt": after[0]}},
                {"at_us": after[0], "_id": {"$lt": after[1]}},
            ]
        with self._errors("reading events"):
            cursor = (
                self._events()
                .find(query, {"data": 1})
                .sort([("at_us", DESCENDING), ("_id", DESCENDING)])
                .limit(limit)
            )
            docs = await cursor.to_list(length=limit)
        return [AuditEvent.model_validate_json(doc["data"]) for doc in docs]

    async def _delete_before(self, at_us: int) -> int:
        with self._errors("deleting expired events"):
            result = await self._events().delete_many({"at_us": {"$lt": at_us}})
        return int(result.deleted_count)

    # -- plumbing --------------------------------------------------------------------------
    def _errors(self, what: str) -> AbstractContextManager[None]:
        return self._mongo.errors(what)

    def _events(self) -> AsyncCollection[Document]:
        return self._mongo.db()[COLLECTION]

    async def _migrate(self, db: AsyncDatabase[Document]) -> None:
        await SCHEMA.migrate(db, self._mongo.where, logger=log)
