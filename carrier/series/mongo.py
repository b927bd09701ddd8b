"""MongoSeriesStore: the counters as a collection of the MongoDB database the store uses.

Its collection (``series``) is its own, and its schema version is its own document in the
shared ``meta`` collection (``{_id: "series_schema", version: N}``), through
:class:`~carrier._mongo_schema.MongoSchema`. A counter is one document whose ``_id`` is its key
(``step|agent|name|t``), so a flush is one unordered ``bulk_write`` of ``$inc`` upserts, and
two processes adding to one counter at once both count.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING, AsyncMongoClient, IndexModel, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier._mongo_schema import MongoSchema
from carrier.series.base import NameFilter, SeriesStore
from carrier.series.model import Row, Step

__all__ = ["COLLECTION", "MongoSeriesStore"]

log = logging.getLogger(__name__)

Document = dict[str, Any]

COLLECTION = "series"
SCHEMA_DOC = "series_schema"
STORE = "MongoDB series store"

INDEXES = (
    IndexModel(
        [("step", ASCENDING), ("agent", ASCENDING), ("name", ASCENDING), ("t", ASCENDING)],
        name="series_key",
    ),
    IndexModel([("step", ASCENDING), ("t", ASCENDING)], name="series_time"),
)


async def _initial(db: AsyncDatabase[Document]) -> None:
    """1: the ``series`` collection and its indexes (the layout is all of it)."""


SCHEMA = MongoSchema(
    doc=SCHEMA_DOC, store=STORE, migrations=(_initial,), indexes={COLLECTION: INDEXES}
)


class MongoSeriesStore(SeriesStore):
    """The counters in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`).
    """

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        handle: MongoHandle | None = None,
    ) -> None:
        if handle is None:
            if client is None:
                raise TypeError(
                    "MongoSeriesStore needs a client (or use MongoSeriesStore.from_url)"
                )
            handle = MongoHandle(client, database, store=STORE, opener="MongoSeriesStore")
        self._mongo = handle

    def __repr__(self) -> str:
        return f"MongoSeriesStore({self._mongo.where!r})"

    @classmethod
    def from_url(cls, url: str) -> MongoSeriesStore:
        """A store from a MongoDB URI; the database is the URI's path (default ``carrier``)."""
        return cls(
            handle=MongoHandle.from_url(
                url, appname="carrier-series", store=STORE, opener="MongoSeriesStore"
            )
        )

    async def open(self) -> None:
        await self._mongo.open(self._migrate)

    async def close(self) -> None:
        await self._mongo.close()

    async def schema_version(self) -> int:
        with self._mongo.errors("reading the schema version"):
            return await SCHEMA.stored_version(self._mongo.db())

    async def _add(self, rows: Sequence[Row]) -> None:
        ops = [
            UpdateOne(
                {"_id": f"{row.step}|{row.agent}|{row.name}|{row.t}"},
                {
                    "$inc": {"value": float(row.value)},
                    "$setOnInsert": {
                        "step": str(row.step),
                        "agent": row.agent,
                        "name": row.name,
                        "t": row.t,
                    },
                },
                upsert=True,
            )
            for row in rows
        ]
        with self._mongo.errors(f"adding {len(ops)} counters"):
            await self._counters().bulk_write(ops, ordered=False)

    async def _select(
        self, step: Step, start: int, end: int, agents: Sequence[str] | None, names: NameFilter
    ) -> list[Row]:
        query: Document = {"step": str(step), "t": {"$gte": start, "$lt": end}}
        if agents is not None:
            query["agent"] = {"$in": list(agents)}
        exact, ranges = names
        wanted: list[Document] = [{"name": {"$gte": low, "$lt": high}} for low, high in ranges]
        if exact:
            wanted.append({"name": {"$in": list(exact)}})
        query["$or"] = wanted
        with self._mongo.errors("reading counters"):
            docs = await self._counters().find(query, {"_id": 0}).to_list(length=None)
        return [
            Row(step, int(d["t"]), str(d["agent"]), str(d["name"]), float(d["value"])) for d in docs
        ]

    async def _delete_before(self, step: Step, t: int) -> int:
        with self._mongo.errors(f"pruning {step} counters"):
            result = await self._counters().delete_many({"step": str(step), "t": {"$lt": t}})
        return int(result.deleted_count)

    def _counters(self) -> AsyncCollection[Document]:
        return self._mongo.db()[COLLECTION]

    async def _migrate(self, db: AsyncDatabase[Document]) -> None:
        await SCHEMA.migrate(db, self._mongo.where, logger=log)
