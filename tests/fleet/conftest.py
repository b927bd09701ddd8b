"""FleetStore factories: the contract suite runs once per backend in ``FLEET_FACTORIES``.

A factory makes stores over one backing database (a SQLite file, a MongoDB database) for one
test; each :meth:`FleetFactory.new_store` is another connection to it, as another process would
have. A factory that needs a server names the fixture providing it in ``fixtures``.

MongoDB runs on the suite's SecantusDB (started ``--standalone``, like a plain mongod: no change
streams, so followers poll), and on a real MongoDB whenever ``CARRIER_TEST_MONGODB_URI`` is set.
The tests of following the change log (the ``feed`` fixtures) also run on a SecantusDB of this
package's own started as a single-node replica set (as in ``docker/compose.yaml``), where a change
stream wakes followers; the rest would only run the same storage engine again.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from carrier.fleet.base import FleetStore
from carrier.fleet.sqlite import SQLiteFleetStore
from carrier.jobs.clock import ManualClock
from tests.mongo_servers import TEST_MONGODB_URI_ENV, MongoServer, secantus_process

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FleetFactory(ABC):
    """Makes fleet stores over one backing database for one test."""

    fixtures: ClassVar[tuple[str, ...]] = ()
    """Fixtures whose values the constructor takes after ``tmp_path`` (e.g. a server)."""

    @abstractmethod
    def new_store(self, clock: ManualClock) -> FleetStore:
        """A new, unopened store over the same data (a second connection, as another process)."""

    @abstractmethod
    def set_schema_version(self, version: int) -> None:
        """Record ``version`` as the fleet's schema version, as a newer Carrier would."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook, a no-op for file-backed stores
        """Remove what the test left on a server (files under ``tmp_path`` go by themselves)."""


class SQLiteFleetFactory(FleetFactory):
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "data" / "carrier.db"

    def new_store(self, clock: ManualClock) -> FleetStore:
        return SQLiteFleetStore(path=self.path, clock=clock)

    def set_schema_version(self, version: int) -> None:
        with closing(sqlite3.connect(self.path)) as db, db:
            db.execute("INSERT INTO fleet_schema_version VALUES (?, 'test')", (version,))


class MongoFleetFactory(FleetFactory):
    """A fresh database on a MongoDB server, dropped after the test."""

    def __init__(self, tmp_path: Path, server: MongoServer) -> None:
        self.server = server
        self.database = f"carrier_fleet_test_{uuid.uuid4().hex[:16]}"
        self.uri = server.database_uri(self.database)

    def new_store(self, clock: ManualClock) -> FleetStore:
        from carrier.fleet.mongo import MongoFleetStore

        return MongoFleetStore.from_url(self.uri, clock=clock)

    def set_schema_version(self, version: int) -> None:
        self.server.client[self.database]["meta"].update_one(
            {"_id": "fleet_schema"}, {"$set": {"version": version}}, upsert=True
        )

    def cleanup(self) -> None:
        self.server.client.drop_database(self.database)


class MongoPolledFleetFactory(MongoFleetFactory):
    fixtures = ("mongo_compatible_server",)


class MongoStreamFleetFactory(MongoFleetFactory):
    fixtures = ("mongo_replica_set_server",)


class MongoRealFleetFactory(MongoFleetFactory):
    fixtures = ("mongo_real_server",)


FACTORIES: dict[str, type[FleetFactory]] = {
    "sqlite": SQLiteFleetFactory,
    "mongo-polled": MongoPolledFleetFactory,
    "mongo-stream": MongoStreamFleetFactory,
}
if os.environ.get(TEST_MONGODB_URI_ENV):
    FACTORIES["mongo-real"] = MongoRealFleetFactory
FLEET_FACTORIES = sorted(name for name in FACTORIES if name != "mongo-stream")
"""The backends of the whole contract."""
FEED_FACTORIES = sorted(FACTORIES)
"""The backends of the change log's followers: every way a follower can be woken."""
MONGO_FLEET_FACTORIES = sorted(name for name in FACTORIES if name != "sqlite")


@pytest.fixture(scope="session")
def mongo_replica_set_server(
    tmp_path_factory: pytest.TempPathFactory, mongo_compatible_server: MongoServer
) -> Iterator[MongoServer]:
    """SecantusDB as a single-node replica set (no ``--standalone``): it serves change streams.

    Asks for the suite's server first, which skips the test, saying why, where SecantusDB is
    not installed."""
    root = tmp_path_factory.mktemp("secantus-rs")
    with secantus_process(root, standalone=False) as (port, _pid):
        server = MongoServer(f"mongodb://127.0.0.1:{port}/")
        try:
            yield server
        finally:
            server.close()


def _make_factory(
    request: pytest.FixtureRequest, tmp_path: Path, name: str
) -> Iterator[FleetFactory]:
    factory_class = FACTORIES[name]
    servers = [request.getfixturevalue(fixture) for fixture in factory_class.fixtures]
    factory = factory_class(tmp_path, *servers)  # type: ignore[call-arg]  # servers: see fixtures
    yield factory
    factory.cleanup()


@pytest.fixture(params=FLEET_FACTORIES)
def fleet_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FleetFactory]:
    yield from _make_factory(request, tmp_path, request.param)


@pytest.fixture(params=FEED_FACTORIES)
def feed_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FleetFactory]:
    yield from _make_factory(request, tmp_path, request.param)


@pytest.fixture(params=MONGO_FLEET_FACTORIES)
def mongo_fleet_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[MongoFleetFactory]:
    """Each MongoDB backend only, for tests of the MongoDB store's own behaviour."""
    for factory in _make_factory(request, tmp_path, request.param):
        assert isinstance(factory, MongoFleetFactory)
        yield factory


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def fleet(fleet_factory: FleetFactory, clock: ManualClock) -> AsyncIterator[FleetStore]:
    """An open, empty fleet store of each backend, on the test's manual clock."""
    async with fleet_factory.new_store(clock) as store:
        yield store


@pytest.fixture
async def feed(feed_factory: FleetFactory, clock: ManualClock) -> AsyncIterator[FleetStore]:
    """An open, empty fleet store of each backend and each way of following its change log."""
    async with feed_factory.new_store(clock) as store:
        yield store
