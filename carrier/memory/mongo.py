"""MongoStore: the Store in a MongoDB database, through PyMongo's ``AsyncMongoClient``.

Usage::

    async with MongoStore.from_url("mongodb://localhost:27017/carrier") as store:
        ...

The store is assembled from parts, each a module of its own beside this one, as the SQLite store
is:

* :mod:`~carrier.memory._mongo_conn`: the database handle (the client, owned or borrowed), its
  collections and reads; driver errors become ``StoreError``\\ s that name the server without
  its password.
* :mod:`~carrier.memory._mongo_schema`: collections, indexes and the schema version, brought up
  to date on open; :mod:`~carrier.memory._mongo_codec`: the document layout.
* :mod:`~carrier.memory._mongo_records` and :mod:`~carrier.memory._mongo_memories`: the Store's
  reads and writes. Documents reference each other by id only, as in the SQLite store: a memory
  may be written before its room, and :meth:`MongoStore.delete_agent` removes what an agent owns
  collection by collection (not in a transaction: a standalone server has none; a failure
  part-way leaves the agent in place, so deleting again finishes the job).
* :mod:`~carrier.memory._mongo_search`: where the server runs ``$vectorSearch`` (detected on
  :meth:`~MongoStore.open`, :attr:`MongoStore.supports_vector_search`) the store creates a vector
  search index per dimension and searches in the server; elsewhere it keeps the agent's vectors
  in an in-process :class:`~carrier.memory.index.VectorIndex`
  (:mod:`~carrier.memory._mongo_changes`), kept in step with this store's writes, and polled for
  what other processes wrote (inserted memories, and a ``memory_changes`` log of the updated or
  deleted). Full-text search uses a text index where the server has them
  (:attr:`MongoStore.supports_text_search`).
"""

from __future__ import annotations

import logging

from pymongo.asynchronous.database import AsyncDatabase

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier.memory._mongo_conn import STORE, Document
from carrier.memory._mongo_memories import Memories
from carrier.memory._mongo_records import Records
from carrier.memory._mongo_schema import (
    SCHEMA_VERSION,
    detect_text_search,
    detect_vector_search,
    migrate,
)
from carrier.memory._mongo_search import MongoSearch
from carrier.memory.base import Store
from carrier.memory.index import VectorIndex

__all__ = ["DEFAULT_DATABASE", "SCHEMA_VERSION", "MongoStore"]

logger = logging.getLogger(__name__)


class MongoStore(Records, Memories, MongoSearch, Store):
    """The Store in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`, made anew by a later :meth:`open`).
    """

    def __repr__(self) -> str:
        return f"MongoStore({self._mongo.where!r})"

    @classmethod
    def from_url(cls, url: str) -> MongoStore:
        """A store from a MongoDB URI; the database is the URI's path (default ``carrier``).

        Nothing is connected until :meth:`open`.
        """
        return cls(
            handle=MongoHandle.from_url(url, appname="carrier", store=STORE, opener="MongoStore")
        )

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        if not await self._mongo.open(self._prepare):
            return
        if not self.supports_vector_search:
            self.vectors = VectorIndex(load=self._load_vectors, count=self._count_vectors)
        logger.debug(
            "MongoStore %s open (vector search: %s, text search: %s)",
            self._mongo.where,
            self.supports_vector_search,
            self.supports_text_search,
        )

    async def _prepare(self, db: AsyncDatabase[Document]) -> None:
        await migrate(db, self._mongo.where)
        self.supports_vector_search = await detect_vector_search(db)
        self.supports_text_search = await detect_text_search(db)

    async def close(self) -> None:
        vectors, self.vectors = self.vectors, None
        if vectors is not None:
            await vectors.close()
        await self._mongo.close()
