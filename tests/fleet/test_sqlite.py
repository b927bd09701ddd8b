"""SQLiteFleetStore specifics: its tables in the shared file, seqs never reused, processes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from carrier.fleet.model import ChangeKind, DesiredState
from carrier.fleet.sqlite import FLEET_SCHEMA_VERSION, SQLiteFleetStore
from carrier.jobs import ManualClock, SQLiteJobStore
from carrier.memory.sqlite import SQLiteStore
from carrier.types import AgentRecord

ROOT = Path(__file__).resolve().parents[2]


async def test_shares_a_file_with_the_other_stores(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "carrier.db"
    async with (
        SQLiteStore(path=path) as store,
        SQLiteJobStore(path=path, clock=clock) as jobs,
        SQLiteFleetStore(path=path, clock=clock) as fleet,
    ):
        await store.upsert_agent(AgentRecord(id="a1", name="Ada", character={"name": "Ada"}))
        await jobs.enqueue("k")
        await fleet.set_desired("a1", DesiredState.RUNNING)
        assert await fleet.schema_version() == FLEET_SCHEMA_VERSION
        assert len(await store.list_agents()) == 1
    with closing(sqlite3.connect(path)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    fleet_tables = {name for name in tables if name.startswith("fleet_")}
    assert fleet_tables == {
        "fleet_schema_version",
        "fleet_revisions",
        "fleet_desired",
        "fleet_imports",
        "fleet_changes",
        "fleet_leases",
    }
    assert {"jobs", "agents"} <= tables


async def test_a_seq_is_never_handed_out_twice(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteFleetStore(path=path, clock=clock) as fleet:
        for _ in range(3):
            last = await fleet.append_change(ChangeKind.DESIRED, "a")
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM fleet_changes")  # more than prune ever does
    async with SQLiteFleetStore(path=path, clock=clock) as fleet:
        assert await fleet.latest_seq() == 0
        again = await fleet.append_change(ChangeKind.DESIRED, "a")
    assert again.seq == last.seq + 1


async def test_processes_sharing_a_file_get_distinct_numbers_and_one_lease(
    tmp_path: Path,
) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteFleetStore(path=path):
        pass  # created once, so the processes race on the data, not on the schema
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.fleet._racer",
            str(path),
            f"w{i}",
            "15",
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for i in range(3)
    ]
    for proc in procs:  # every one open before any starts
        assert proc.stdout is not None
        assert await proc.stdout.readline() == b"ready\n"
    outputs = await asyncio.gather(*(proc.communicate(b"go\n") for proc in procs))
    results = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        results.append(json.loads(out))
    numbers = sorted(n for result in results for n in result["numbers"])
    assert numbers == list(range(1, 46))
    assert [result["lease"] for result in results].count(True) == 1
    async with SQLiteFleetStore(path=path) as fleet:
        logged = [c.detail["revision"] for c in await fleet.changes(0, limit=100)]
        assert sorted(logged) == numbers
        lease = await fleet.lease("discord:race")
        assert lease is not None
        winner = next(i for i, result in enumerate(results) if result["lease"])
        assert lease.owner == f"w{winner}"
