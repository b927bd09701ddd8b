"""Store factories: the contract suite runs once per backend listed in ``STORE_FACTORIES``.

To add a backend, write a :class:`StoreFactory` for it and add it to the dict; every test in
``test_store_contract.py`` then runs against it too. A factory that needs a server names the
fixture providing it in ``fixtures``; that fixture's value is passed to its constructor.

MongoDB runs three times over: against SecantusDB, a MongoDB-compatible server from PyPI that a
session fixture starts on a free loopback port (skipped, saying why, when it is not installed),
against SecantusDB behind a loopback proxy that adds Atlas Vector Search (``$vectorSearch``,
see :mod:`tests.memory.atlas_search`), and against a real MongoDB whenever
``CARRIER_TEST_MONGODB_URI`` is set (e.g. ``mongodb://localhost:27017``). Each test gets a fresh
database, dropped afterwards.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path
from typing import ClassVar

import pytest

from carrier.memory.base import Store
from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore
from tests.mongo_servers import TEST_MONGODB_URI_ENV, MongoServer, ProxiedMongoServer


class StoreFactory(ABC):
    """Makes stores over one backing database (a file, a MongoDB database) for one test."""

    latest_schema_version: int
    """The schema version this Carrier writes."""

    fixtures: ClassVar[tuple[str, ...]] = ()
    """Fixtures whose values the constructor takes after ``tmp_path`` (e.g. a server)."""

    @abstractmethod
    def new_store(self) -> Store:
        """A new, unopened store over the same data (to test reopening)."""

    @abstractmethod
    def stored_schema_version(self) -> int:
        """The schema version recorded in the backing database, read without the store."""

    @abstractmethod
    def record_schema_version(self, version: int) -> None:
        """Record a schema version behind the store's back (as a newer Carrier would)."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook, a no-op for file-backed stores
        """Remove what the test left on a server (files under ``tmp_path`` go by themselves)."""


class SQLiteFactory(StoreFactory):
    latest_schema_version = SCHEMA_VERSION
    vector_index = True

    def __init__(self, tmp_path: Path) -> None:
        # A directory that does not exist yet: the store creates it.
        self.path = tmp_path / "data" / "carrier.db"

    def new_store(self) -> Store:
        return SQLiteStore(path=self.path, vector_index=self.vector_index)

    def stored_schema_version(self) -> int:
        with closing(sqlite3.connect(self.path)) as db:
            return int(db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])

    def record_schema_version(self, version: int) -> None:
        with closing(sqlite3.connect(self.path)) as db, db:
            db.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, 'test')", (version,)
            )


class SQLiteScanFactory(SQLiteFactory):
    """SQLite without the in-memory vector index: searches read candidates from the file (the
    path a search takes while the index loads)."""

    vector_index = False


# -- MongoDB: the servers are the session's (tests/mongo_servers.py) -----------------------------


class MongoFactory(StoreFactory):
    """A fresh database on a MongoDB server, dropped after the test."""

    def __init__(self, tmp_path: Path, server: MongoServer) -> None:
        from carrier.memory._mongo_schema import SCHEMA_VERSION as MONGO_SCHEMA_VERSION

        self.latest_schema_version = MONGO_SCHEMA_VERSION
        self.server = server
        self.database = f"carrier_test_{uuid.uuid4().hex[:16]}"
        self.uri = server.database_uri(self.database)

    def new_store(self) -> Store:
        from carrier.memory.mongo import MongoStore

        return MongoStore.from_url(self.uri)

    def stored_schema_version(self) -> int:
        doc = self.server.client[self.database]["meta"].find_one({"_id": "schema"})
        return int(doc["version"])

    def record_schema_version(self, version: int) -> None:
        self.server.client[self.database]["meta"].update_one(
            {"_id": "schema"}, {"$set": {"version": version}}, upsert=True
        )

    def cleanup(self) -> None:
        self.server.client.drop_database(self.database)


class MongoCompatibleFactory(MongoFactory):
    fixtures = ("mongo_compatible_server",)


class MongoRealFactory(MongoFactory):
    fixtures = ("mongo_real_server",)


class MongoVectorSearchFactory(MongoFactory):
    """A server with ``$vectorSearch`` whose indexes for the suite's dimensions were built a
    while ago (for another dimension the store creates one and, until it is queryable, scores
    the vectors it reads from the database)."""

    fixtures = ("mongo_vector_search_server",)
    DIMS = (3, 64, 256)

    def __init__(self, tmp_path: Path, server: ProxiedMongoServer) -> None:
        from carrier.memory._mongo_search import vector_index_definition, vector_index_name

        super().__init__(tmp_path, server)
        for dim in self.DIMS:
            server.proxy.define(
                self.database,
                "memories",
                name=vector_index_name(dim),
                definition=vector_index_definition(dim),
            )


STORE_FACTORIES: dict[str, type[StoreFactory]] = {
    "sqlite": SQLiteFactory,
    "sqlite-scan": SQLiteScanFactory,
    "mongo-compatible": MongoCompatibleFactory,
    "mongo-vector-search": MongoVectorSearchFactory,
}
if os.environ.get(TEST_MONGODB_URI_ENV):
    STORE_FACTORIES["mongo-real"] = MongoRealFactory


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    factory_class = STORE_FACTORIES[request.param]
    servers = [request.getfixturevalue(name) for name in factory_class.fixtures]
    factory = factory_class(tmp_path, *servers)  # type: ignore[call-arg]  # servers: see fixtures
    yield factory
    factory.cleanup()


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    """An open, empty store of each backend."""
    async with store_factory.new_store() as opened:
        yield opened
