"""JobStore factories: the contract suite runs once per backend in ``JOB_STORE_FACTORIES``.

To add a backend, write a :class:`JobStoreFactory` for it and add it to the dict; every test that
takes the ``job_store_factory`` or ``jobs`` fixture then runs against it too. A factory that needs
a server names the fixture providing it in ``fixtures``; that fixture's value is passed to its
constructor.

MongoDB runs against SecantusDB (a MongoDB-compatible server that a session fixture of
``tests/memory/conftest.py`` starts on a free loopback port; skipped, saying why, when it is not
installed), and against a real MongoDB whenever ``CARRIER_TEST_MONGODB_URI`` is set. Each test
gets a fresh database, dropped afterwards.
"""

from __future__ import annotations

import os
import random
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from carrier.jobs import Backoff, Job, JobStore, ManualClock, SQLiteJobStore
from tests.mongo_servers import TEST_MONGODB_URI_ENV, MongoServer

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class JobStoreFactory(ABC):
    """Makes job stores over one backing database (a file, a MongoDB database) for one test."""

    fixtures: ClassVar[tuple[str, ...]] = ()
    """Fixtures whose values the constructor takes after ``tmp_path`` (e.g. a server)."""

    @abstractmethod
    def new_store(self, clock: ManualClock) -> JobStore:
        """A new, unopened store over the same data (a second connection, as another process)."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook, a no-op for file-backed stores
        """Remove what the test left on a server (files under ``tmp_path`` go by themselves)."""


class SQLiteJobFactory(JobStoreFactory):
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "data" / "carrier.db"

    def new_store(self, clock: ManualClock) -> JobStore:
        return SQLiteJobStore(path=self.path, clock=clock)


class MongoJobFactory(JobStoreFactory):
    """A fresh database on a MongoDB server, dropped after the test."""

    def __init__(self, tmp_path: Path, server: MongoServer) -> None:
        self.server = server
        self.database = f"carrier_jobs_test_{uuid.uuid4().hex[:16]}"
        self.uri = server.database_uri(self.database)

    def new_store(self, clock: ManualClock) -> JobStore:
        from carrier.jobs.mongo import MongoJobStore

        return MongoJobStore.from_url(self.uri, clock=clock)

    def cleanup(self) -> None:
        self.server.client.drop_database(self.database)


class MongoCompatibleJobFactory(MongoJobFactory):
    fixtures = ("mongo_compatible_server",)


class MongoRealJobFactory(MongoJobFactory):
    fixtures = ("mongo_real_server",)


JOB_STORE_FACTORIES: dict[str, type[JobStoreFactory]] = {
    "sqlite": SQLiteJobFactory,
    "mongo-compatible": MongoCompatibleJobFactory,
}
if os.environ.get(TEST_MONGODB_URI_ENV):
    JOB_STORE_FACTORIES["mongo-real"] = MongoRealJobFactory
MONGO_JOB_STORE_FACTORIES = sorted(name for name in JOB_STORE_FACTORIES if name != "sqlite")


def _make_factory(
    request: pytest.FixtureRequest, tmp_path: Path, name: str
) -> Iterator[JobStoreFactory]:
    factory_class = JOB_STORE_FACTORIES[name]
    servers = [request.getfixturevalue(fixture) for fixture in factory_class.fixtures]
    factory = factory_class(tmp_path, *servers)  # type: ignore[call-arg]  # servers: see fixtures
    yield factory
    factory.cleanup()


@pytest.fixture(params=sorted(JOB_STORE_FACTORIES))
def job_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStoreFactory]:
    yield from _make_factory(request, tmp_path, request.param)


@pytest.fixture(params=MONGO_JOB_STORE_FACTORIES)
def mongo_job_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MongoJobFactory]:
    """Each MongoDB backend only, for tests of the MongoDB store's own behaviour."""
    for factory in _make_factory(request, tmp_path, request.param):
        assert isinstance(factory, MongoJobFactory)
        yield factory


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def jobs(job_store_factory: JobStoreFactory, clock: ManualClock) -> AsyncIterator[JobStore]:
    """An open, empty job store of each backend, on the test's manual clock."""
    async with job_store_factory.new_store(clock) as store:
        yield store


@pytest.fixture
def no_jitter() -> Backoff:
    """Backoff of 10 s, 20 s, 40 s ... capped at 60 s, without jitter: retry times are exact."""
    return Backoff(base_s=10, factor=2, cap_s=60, jitter=0, rng=random.Random(0))


LEASE = 30.0
"""The lease the contract tests claim with."""


async def claimed(jobs: JobStore, worker: str = "w1", kind: str = "k", **kw: object) -> Job:
    """Enqueue one due job of ``kind`` and claim it for ``worker``."""
    job = await jobs.enqueue(kind, **kw)  # type: ignore[arg-type]
    [got] = await jobs.claim(worker, [kind], lease_s=LEASE)
    assert got.id == job.id
    return got
