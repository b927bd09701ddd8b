"""JobStore factories: the contract suite runs once per backend in ``JOB_STORE_FACTORIES``.

To add a backend (MongoDB), write a :class:`JobStoreFactory` for it and add it to the dict; every
test that takes the ``job_store_factory`` or ``jobs`` fixture then runs against it too.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carrier.jobs import Backoff, Job, JobStore, ManualClock, SQLiteJobStore

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class JobStoreFactory(ABC):
    """Makes job stores over one backing database (a file, a MongoDB database) for one test."""

    @abstractmethod
    def new_store(self, clock: ManualClock) -> JobStore:
        """A new, unopened store over the same data (a second connection, as another process)."""


class SQLiteJobFactory(JobStoreFactory):
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "data" / "carrier.db"

    def new_store(self, clock: ManualClock) -> JobStore:
        return SQLiteJobStore(path=self.path, clock=clock)


JOB_STORE_FACTORIES: dict[str, Callable[[Path], JobStoreFactory]] = {
    "sqlite": SQLiteJobFactory,
}


@pytest.fixture(params=sorted(JOB_STORE_FACTORIES))
def job_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> JobStoreFactory:
    return JOB_STORE_FACTORIES[request.param](tmp_path)


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
