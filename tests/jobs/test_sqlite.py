"""SQLiteJobStore specifics: its own schema version table, sharing the main store's file."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from carrier._sqlite_thread import SQLiteThread
from carrier.errors import StoreError
from carrier.jobs import ManualClock, SQLiteJobStore
from carrier.jobs.sqlite import JOBS_SCHEMA_VERSION
from carrier.memory.sqlite import SQLiteStore
from carrier.types import AgentRecord


async def test_shares_a_file_with_the_main_store(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store, SQLiteJobStore(path=path, clock=clock) as jobs:
        await store.upsert_agent(AgentRecord(id="a1", name="Ada", character={"name": "Ada"}))
        job = await jobs.enqueue("k")
        assert await jobs.schema_version() == JOBS_SCHEMA_VERSION
        assert await store.schema_version() >= 1
        assert len(await store.list_agents()) == 1
        assert await jobs.get(job.id) == job
    with closing(sqlite3.connect(path)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"jobs", "schedules", "jobs_schema_version", "schema_version", "agents"} <= tables


async def test_refuses_a_newer_schema(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteJobStore(path=path, clock=clock):
        pass
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("INSERT INTO jobs_schema_version VALUES (?, 'test')", (JOBS_SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer than this Carrier supports"):
        async with SQLiteJobStore(path=path, clock=clock):
            pass


async def test_migrations_are_logged_in_one_line(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="carrier.jobs.sqlite")
    path = tmp_path / "carrier.db"

    def said() -> list[str]:
        lines = [r.getMessage() for r in caplog.records if r.name == "carrier.jobs.sqlite"]
        caplog.clear()
        return lines

    async with SQLiteJobStore(path=path, clock=clock):
        pass
    assert said() == [f"job tables in {path} created at version {JOBS_SCHEMA_VERSION}"]
    async with SQLiteJobStore(path=path, clock=clock):
        pass
    assert said() == []

    steps = [("CREATE TABLE t1 (x INTEGER)",)]
    for more in (steps, [*steps, ("CREATE TABLE t2 (x)",), ("CREATE TABLE t3 (x)",)]):
        thread = SQLiteThread(
            path=path,
            version_table="t_version",
            migrations=more,
            stamp=lambda: "now",
            name="job store",
            tables="job tables",
            opener="SQLiteJobStore",
            logger=logging.getLogger("carrier.jobs.sqlite"),
        )
        await thread.open()
        await thread.close()
    assert said() == [
        f"job tables in {path} created at version 1",
        f"job tables in {path} migrated from version 1 to 3",
    ]


async def test_unopened_store_says_how_to_open_it(tmp_path: Path) -> None:
    jobs = SQLiteJobStore(path=tmp_path / "x.db")
    with pytest.raises(StoreError, match="not open"):
        await jobs.get("x")
    await jobs.close()  # closing twice, or unopened, is fine


async def test_unwritable_directory_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="CARRIER_DATA_DIR"):
        async with SQLiteJobStore(path=blocker / "sub" / "carrier.db"):
            pass
