"""The MongoDB store's connection: its database handle, collections, reads, errors as StoreError.

The handle (:class:`carrier._mongo.MongoHandle`) owns the client (or borrows the caller's) and
turns every driver error into a :class:`~carrier.errors.StoreError` that names the server, without
its password, and what was being done. The parts of :class:`~carrier.memory.mongo.MongoStore`
build on this class.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from carrier._mongo import DEFAULT_DATABASE, MongoHandle

__all__ = ["STORE", "Document", "MongoConnection"]

Document = dict[str, Any]

STORE = "MongoDB store"
"""How errors name this store."""


class MongoConnection:
    """The database of one MongoDB store and the reads run over it; the base of
    :class:`~carrier.memory.mongo.MongoStore` and of the parts it is made of."""

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        handle: MongoHandle | None = None,
    ) -> None:
        if handle is None:
            if client is None:
                raise TypeError("MongoStore needs a client (or use MongoStore.from_url)")
            handle = MongoHandle(client, database, store=STORE, opener="MongoStore")
        self._mongo = handle
        self.supports_vector_search: bool | None = None
        """Whether the server runs ``$vectorSearch``; ``None`` until ``open()``."""
        self.supports_text_search: bool | None = None
        """Whether the server has text indexes (``$text``); ``None`` until ``open()``."""

    @property
    def database(self) -> str:
        return self._mongo.database

    def _errors(self, what: str) -> AbstractContextManager[None]:
        return self._mongo.errors(what)

    def _col(self, name: str) -> AsyncCollection[Document]:
        return self._mongo.db()[name]

    async def _find(
        self,
        what: str,
        collection: str,
        query: Document,
        projection: Document | None = None,
        *,
        sort: list[tuple[str, int]] | None = None,
        limit: int = 0,
    ) -> list[Document]:
        col = self._col(collection)
        with self._errors(what):
            cursor = col.find(query, projection, sort=sort, limit=limit)
            return await cursor.to_list()

    async def _find_one(self, what: str, collection: str, query: Document) -> Document | None:
        col = self._col(collection)
        with self._errors(what):
            return await col.find_one(query)
