"""Store factories: the contract suite runs once per backend listed in ``STORE_FACTORIES``.

To add a backend, write a :class:`StoreFactory` for it and add it to the dict; every test in
``test_store_contract.py`` then runs against it too.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path

import pytest

from carrier.memory.base import Store
from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore


class StoreFactory(ABC):
    """Makes stores over one backing database (a file, a MongoDB database) for one test."""

    latest_schema_version: int
    """The schema version this Carrier writes."""

    @abstractmethod
    def new_store(self) -> Store:
        """A new, unopened store over the same data (to test reopening)."""

    @abstractmethod
    def stored_schema_version(self) -> int:
        """The schema version recorded in the backing database, read without the store."""

    @abstractmethod
    def record_schema_version(self, version: int) -> None:
        """Record a schema version behind the store's back (as a newer Carrier would)."""


class SQLiteFactory(StoreFactory):
    latest_schema_version = SCHEMA_VERSION

    def __init__(self, tmp_path: Path) -> None:
        # A directory that does not exist yet: the store creates it.
        self.path = tmp_path / "data" / "carrier.db"

    def new_store(self) -> Store:
        return SQLiteStore(path=self.path)

    def stored_schema_version(self) -> int:
        with closing(sqlite3.connect(self.path)) as db:
            return int(db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])

    def record_schema_version(self, version: int) -> None:
        with closing(sqlite3.connect(self.path)) as db, db:
            db.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, 'test')", (version,)
            )


STORE_FACTORIES: dict[str, Callable[[Path], StoreFactory]] = {
    "sqlite": SQLiteFactory,
}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    return STORE_FACTORIES[request.param](tmp_path)


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    """An open, empty store of each backend."""
    async with store_factory.new_store() as opened:
        yield opened
