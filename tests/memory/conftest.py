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

import importlib.util
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import pytest

from carrier.memory.base import Store
from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore


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


# -- MongoDB ------------------------------------------------------------------------------------
TEST_MONGODB_URI_ENV = "CARRIER_TEST_MONGODB_URI"
SERVER_START_TIMEOUT_S = 30.0


class MongoServer:
    """A MongoDB (or compatible) server the tests use, with a sync client for checks."""

    def __init__(self, uri: str) -> None:
        from pymongo import MongoClient

        self.uri = uri
        self.client: Any = MongoClient(uri, serverSelectionTimeoutMS=10_000)

    def database_uri(self, database: str) -> str:
        """The server's URI naming ``database``; credentials still authenticate where they did."""
        parts = urlsplit(self.uri)
        query = parts.query
        if "@" in parts.netloc and "authsource=" not in query.lower():
            auth_db = parts.path.strip("/") or "admin"
            query = f"{query}&authSource={auth_db}" if query else f"authSource={auth_db}"
        return urlunsplit(parts._replace(path=f"/{database}", query=query))

    def close(self) -> None:
        self.client.close()

    @contextmanager
    def fresh_database(self) -> Iterator[str]:
        """A new database name on the server; the database is dropped afterwards."""
        name = f"carrier_test_{uuid.uuid4().hex[:16]}"
        try:
            yield name
        finally:
            self.client.drop_database(name)


def _free_loopback_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"SecantusDB exited with {process.returncode} on start:\n{log.read_text()[-2000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"SecantusDB did not listen on port {port} in {SERVER_START_TIMEOUT_S} s")


@pytest.fixture(scope="session")
def mongo_compatible_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MongoServer]:
    """SecantusDB (a MongoDB-compatible server on WiredTiger) on a free loopback port."""
    if importlib.util.find_spec("secantus") is None or importlib.util.find_spec("pymongo") is None:
        pytest.skip(
            "SecantusDB or pymongo is not installed, so the MongoDB store is not tested against "
            "a compatible server; make install-dev installs both"
        )
    root = tmp_path_factory.mktemp("secantus")
    config = root / "secantusd.toml"  # an empty config: no secantusd.toml from $HOME or /etc
    config.write_text("")
    log = root / "server.log"
    for _attempt in range(3):  # another process may take the free port before the server does
        port = _free_loopback_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "secantus",
                    "--config", str(config),
                    "--host", "127.0.0.1",
                    "--port", str(port),
                    "--storage-path", str(root / "data"),
                    "--log-level", "WARNING",
                    "--standalone",  # like a plain mongod (the mongo:7 of docker/compose.yaml)
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=root,
            )  # fmt: skip
        try:
            _wait_for_port(port, process, log)
            break
        except RuntimeError:
            process.kill()
            process.wait()
            if "in use" not in log.read_text():
                raise
    else:
        raise RuntimeError(f"SecantusDB found no free port:\n{log.read_text()[-2000:]}")
    server = MongoServer(f"mongodb://127.0.0.1:{port}/")
    try:
        yield server
    finally:
        server.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def mongo_vector_search_proxy(mongo_compatible_server: MongoServer) -> Iterator[Any]:
    """Atlas Vector Search (:mod:`tests.memory.atlas_search`) in front of SecantusDB."""
    from tests.memory.atlas_search import VectorSearchProxy

    host, port = mongo_compatible_server.client.address
    proxy = VectorSearchProxy((host, port))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


class ProxiedMongoServer(MongoServer):
    """SecantusDB behind the vector search proxy: a MongoDB server with ``$vectorSearch``."""

    def __init__(self, proxy: Any) -> None:
        super().__init__(proxy.uri)
        self.proxy = proxy


@pytest.fixture(scope="session")
def mongo_vector_search_server(mongo_vector_search_proxy: Any) -> Iterator[ProxiedMongoServer]:
    server = ProxiedMongoServer(mongo_vector_search_proxy)
    yield server
    server.close()


@pytest.fixture(scope="session")
def mongo_real_server() -> Iterator[MongoServer]:
    """The real MongoDB named by ``CARRIER_TEST_MONGODB_URI``."""
    uri = os.environ.get(TEST_MONGODB_URI_ENV)
    if not uri:
        pytest.skip(f"set {TEST_MONGODB_URI_ENV} to test against a real MongoDB")
    server = MongoServer(uri)
    yield server
    server.close()


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
