"""FleetStore factories: the contract suite runs once per backend in ``FLEET_FACTORIES``.

A factory makes stores over one backing database (a SQLite file, a MongoDB database) for one
test; each :meth:`FleetFactory.new_store` is another connection to it, as another process would
have. A factory that needs a server names the fixture providing it in ``fixtures``.
"""

from __future__ import annotations

import sqlite3
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


FLEET_FACTORIES: dict[str, type[FleetFactory]] = {
    "sqlite": SQLiteFleetFactory,
}


def _make_factory(
    request: pytest.FixtureRequest, tmp_path: Path, name: str
) -> Iterator[FleetFactory]:
    factory_class = FLEET_FACTORIES[name]
    servers = [request.getfixturevalue(fixture) for fixture in factory_class.fixtures]
    factory = factory_class(tmp_path, *servers)  # type: ignore[call-arg]  # servers: see fixtures
    yield factory
    factory.cleanup()


@pytest.fixture(params=sorted(FLEET_FACTORIES))
def fleet_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FleetFactory]:
    yield from _make_factory(request, tmp_path, request.param)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def fleet(fleet_factory: FleetFactory, clock: ManualClock) -> AsyncIterator[FleetStore]:
    """An open, empty fleet store of each backend, on the test's manual clock."""
    async with fleet_factory.new_store(clock) as store:
        yield store
