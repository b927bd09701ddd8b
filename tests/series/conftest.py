"""Series store fixtures: every test that takes ``series_factory`` or ``series`` runs once per
backend, SQLite (a file) and MongoDB (a fresh database on the MongoDB-compatible server
``tests/mongo_servers.py`` starts on loopback, and on a real MongoDB when
``CARRIER_TEST_MONGODB_URI`` is set)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from carrier.series import SeriesStore, SQLiteSeriesStore
from tests.mongo_servers import TEST_MONGODB_URI_ENV, MongoServer

T0 = 1_714_564_800.0
"""2024-05-01 12:00:00 UTC: a minute, a day and a month start before it."""


class SeriesFactory:
    """Series stores over one database (a second store is another process's)."""

    name: str

    def new_store(self) -> SeriesStore:
        raise NotImplementedError

    def settings_env(self) -> dict[str, str]:
        """The environment a host uses to reach this database."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Drop what a server keeps."""


class SQLiteSeries(SeriesFactory):
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.path = self.data / "carrier.db"

    def new_store(self) -> SeriesStore:
        return SQLiteSeriesStore(path=self.path)

    def settings_env(self) -> dict[str, str]:
        return {"CARRIER_DATA_DIR": str(self.data)}


class MongoSeries(SeriesFactory):
    def __init__(self, name: str, server: MongoServer, tmp_path: Path) -> None:
        self.name = name
        self.server = server
        self.data = tmp_path / "data"
        self.database = f"carrier_series_test_{uuid.uuid4().hex[:16]}"

    def new_store(self) -> SeriesStore:
        from carrier.series.mongo import MongoSeriesStore

        return MongoSeriesStore.from_url(self.server.database_uri(self.database))

    def settings_env(self) -> dict[str, str]:
        return {
            "CARRIER_DATA_DIR": str(self.data),
            "CARRIER_MONGODB_URI": self.server.database_uri(self.database),
        }

    def cleanup(self) -> None:
        self.server.client.drop_database(self.database)


BACKENDS = ["sqlite", "mongo-compatible"] + (
    ["mongo-real"] if os.environ.get(TEST_MONGODB_URI_ENV) else []
)


@pytest.fixture(params=BACKENDS)
def series_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SeriesFactory]:
    if request.param == "sqlite":
        yield SQLiteSeries(tmp_path)
        return
    server = request.getfixturevalue(
        "mongo_compatible_server" if request.param == "mongo-compatible" else "mongo_real_server"
    )
    factory = MongoSeries(request.param, server, tmp_path)
    yield factory
    factory.cleanup()


@pytest.fixture
async def series(series_factory: SeriesFactory) -> AsyncIterator[SeriesStore]:
    """An open, empty series store of each backend."""
    async with series_factory.new_store() as store:
        yield store


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
