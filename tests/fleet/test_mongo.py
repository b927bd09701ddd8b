"""MongoFleetStore specifics: its collections, change streams where the server has them (and
polling where it has not, or while a stream is down), errors without the password."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from carrier.errors import ConfigError, StoreError
from carrier.fleet import _mongo_stream
from carrier.fleet.model import ChangeKind, DesiredState, RevisionSource
from carrier.fleet.mongo import FLEET_SCHEMA_VERSION, MongoFleetStore
from carrier.jobs.clock import ManualClock
from tests.fleet.conftest import (
    MongoFleetFactory,
    MongoPolledFleetFactory,
    MongoStreamFleetFactory,
)
from tests.mongo_servers import MongoServer, _free_loopback_port

BOUND_S = 10.0
"""A bound on a wait that should end soon: a store that never wakes fails, never hangs."""

STREAM_TASK = "carrier-fleet-change-stream"


@pytest.fixture
def polled(tmp_path: Path, mongo_compatible_server: MongoServer) -> Iterator[MongoFleetFactory]:
    factory = MongoPolledFleetFactory(tmp_path, mongo_compatible_server)
    yield factory
    factory.cleanup()


@pytest.fixture
def streamed(tmp_path: Path, mongo_replica_set_server: MongoServer) -> Iterator[MongoFleetFactory]:
    factory = MongoStreamFleetFactory(tmp_path, mongo_replica_set_server)
    yield factory
    factory.cleanup()


async def until(condition: Callable[[], bool]) -> None:
    """Wait (within :data:`BOUND_S`) for ``condition``, which something else makes true."""
    async with asyncio.timeout(BOUND_S):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


def stream_tasks() -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks() if task.get_name() == STREAM_TASK]


def interrupt_streams(factory: MongoFleetFactory) -> None:
    """End every change stream on the change log, as a failover or a dropped cursor would:
    renaming a collection invalidates its streams (renamed back, no entry is lost)."""
    admin = factory.server.client.admin
    log = f"{factory.database}.fleet_changes"
    admin.command("renameCollection", log, to=f"{log}_away")
    admin.command("renameCollection", f"{log}_away", to=log)


async def test_collections_indexes_and_schema_version(
    mongo_fleet_factory: MongoFleetFactory, clock: ManualClock
) -> None:
    async with mongo_fleet_factory.new_store(clock) as fleet:
        assert isinstance(fleet, MongoFleetStore)
        assert await fleet.schema_version() == FLEET_SCHEMA_VERSION
        await fleet.add_revision("harbor", {"name": "Harbor"}, source=RevisionSource.API)
    db = mongo_fleet_factory.server.client[mongo_fleet_factory.database]
    names = set(db.list_collection_names())
    assert {
        "fleet_revisions",
        "fleet_desired",
        "fleet_imports",
        "fleet_changes",
        "fleet_leases",
        "meta",
    } <= names
    unique = [ix for ix in db["fleet_revisions"].list_indexes() if ix.get("unique")]
    assert [list(ix["key"]) for ix in unique] == [["agent_id", "number"]]
    assert db["meta"].find_one({"_id": "fleet_schema"})["version"] == FLEET_SCHEMA_VERSION
    assert db["fleet_revisions"].find_one()["character"] == '{"name":"Harbor"}'  # JSON text


async def test_a_standalone_server_is_polled(
    polled: MongoFleetFactory, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="carrier.fleet")
    async with polled.new_store(clock) as follower, polled.new_store(clock) as writer:
        assert isinstance(follower, MongoFleetStore)
        assert not follower.follows_change_stream
        assert stream_tasks() == []
        said = [r.getMessage() for r in caplog.records if r.name.startswith("carrier.fleet")]
        assert any("change stream" in s and "poll the change log" in s for s in said), said
        follower.poll_s = 0.02
        waiter = asyncio.create_task(follower.wait_changes(0, wait_s=60))
        await writer.set_desired("harbor", DesiredState.RUNNING)
        found = await asyncio.wait_for(waiter, BOUND_S)
        assert [c.kind for c in found] == [ChangeKind.DESIRED]


async def test_a_change_stream_wakes_a_waiter(
    streamed: MongoFleetFactory, clock: ManualClock
) -> None:
    async with streamed.new_store(clock) as follower, streamed.new_store(clock) as writer:
        assert isinstance(follower, MongoFleetStore)
        assert follower.follows_change_stream
        follower.poll_s = follower.stream_backstop_s = 600.0  # only the stream can wake it
        seen = await follower.latest_seq()
        waiter = asyncio.create_task(follower.wait_changes(seen, wait_s=600))
        await asyncio.sleep(0.05)
        await writer.add_revision("harbor", {"name": "Harbor"}, source=RevisionSource.API)
        found = await asyncio.wait_for(waiter, BOUND_S)
        assert [(c.kind, c.agent_id) for c in found] == [(ChangeKind.CHARACTER, "harbor")]
    assert stream_tasks() == []  # closing stopped it


async def test_a_stream_that_ends_loses_no_changes(
    streamed: MongoFleetFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mongo_stream, "RETRY_S", (600.0, 600.0))  # it stays down
    async with streamed.new_store(clock) as follower, streamed.new_store(clock) as writer:
        assert isinstance(follower, MongoFleetStore)
        follower.poll_s, follower.stream_backstop_s = 0.02, 600.0
        seen = await follower.latest_seq()
        interrupt_streams(streamed)
        await until(lambda: not follower.follows_change_stream)
        waiter = asyncio.create_task(follower.wait_changes(seen, wait_s=600))
        await writer.set_desired("harbor", DesiredState.STOPPED)
        found = await asyncio.wait_for(waiter, BOUND_S)
        assert [(c.kind, c.agent_id) for c in found] == [(ChangeKind.DESIRED, "harbor")]
    assert stream_tasks() == []  # closing stopped its wait for another try too


async def test_a_stream_that_ends_comes_back(
    streamed: MongoFleetFactory,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="carrier.fleet")
    monkeypatch.setattr(_mongo_stream, "RETRY_S", (0.05, 0.05))
    async with streamed.new_store(clock) as follower, streamed.new_store(clock) as writer:
        assert isinstance(follower, MongoFleetStore)
        interrupt_streams(streamed)

        def said(text: str) -> bool:
            return any(text in r.getMessage() for r in caplog.records)

        await until(lambda: said("change stream ended") and said("change stream back"))
        await until(lambda: follower.follows_change_stream)
        follower.poll_s = follower.stream_backstop_s = 600.0  # only the stream can wake it
        seen = await follower.latest_seq()
        waiter = asyncio.create_task(follower.wait_changes(seen, wait_s=600))
        await asyncio.sleep(0.05)
        await writer.append_change(ChangeKind.CLIENT_CONFIG, detail={"client": "discord"})
        found = await asyncio.wait_for(waiter, BOUND_S)
        assert [c.detail for c in found] == [{"client": "discord"}]


async def test_errors_never_show_the_password(clock: ManualClock) -> None:
    port = _free_loopback_port()  # nothing listens there
    url = f"mongodb://carrier:s3cr3t-pw@127.0.0.1:{port}/fleet?serverSelectionTimeoutMS=200"
    store = MongoFleetStore.from_url(url, clock=clock)
    with pytest.raises(StoreError) as caught:
        await store.open()
    message = str(caught.value)
    assert "s3cr3t-pw" not in message and "s3cr3t-pw" not in repr(store)
    assert message.startswith(f"MongoDB fleet store mongodb://127.0.0.1:{port}/fleet: opening")
    assert "CARRIER_MONGODB_URI" in message
    with pytest.raises(ConfigError, match="CARRIER_MONGODB_URI"):
        MongoFleetStore.from_url("postgres://carrier:s3cr3t-pw@host/db")


def test_a_client_or_a_url_is_needed() -> None:
    with pytest.raises(TypeError, match="from_url"):
        MongoFleetStore()
