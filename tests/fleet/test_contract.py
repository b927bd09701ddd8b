"""The FleetStore contract: every backend in ``conftest.FLEET_FACTORIES`` passes it, and the
tests of following the change log run on each of ``conftest.FEED_FACTORIES``."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from carrier.errors import StoreError
from carrier.fleet.base import FleetStore, RevisionConflict
from carrier.fleet.model import (
    ChangeKind,
    DesiredState,
    ImportMark,
    RevisionSource,
    character_digest,
)
from carrier.jobs.clock import ManualClock
from tests.fleet.conftest import T0, FleetFactory, at

API = RevisionSource.API
RUNNING, STOPPED = DesiredState.RUNNING, DesiredState.STOPPED
BOUND_S = 10.0
"""A bound on a wait that should end at once: a store that waited instead fails, never hangs."""


def character(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "bio": [f"{name} lives by the sea"], **extra}


def is_utc(value: datetime) -> bool:
    return value.tzinfo is not None and value.utcoffset() == timedelta(0)


# -- revisions ---------------------------------------------------------------------------------
async def test_revisions_are_numbered_from_one(fleet: FleetStore, clock: ManualClock) -> None:
    first = await fleet.add_revision("harbor", character("Harbor"), source=API, actor="admin")
    clock.advance(5)
    second = await fleet.add_revision(
        "harbor", character("Harbor", age=40), source=RevisionSource.FILE, actor="a.yaml"
    )
    other = await fleet.add_revision("tide", character("Tide"), source=API, note="made")
    assert (first.number, second.number, other.number) == (1, 2, 1)
    assert first.agent_id == "harbor"
    assert first.character == character("Harbor")
    assert first.digest == character_digest(character("Harbor"))
    assert (first.source, first.actor, first.note) == (API, "admin", None)
    assert (other.actor, other.note) == (None, "made")
    assert (first.created_at, second.created_at) == (T0, at(5))
    assert is_utc(first.created_at)
    assert await fleet.revision("harbor", 1) == first
    assert await fleet.revision("harbor", 2) == second


async def test_a_character_round_trips_exactly(fleet: FleetStore) -> None:
    data = {
        "name": "Wave ☂",
        "settings": {"a.b": 1, "$x": [None, True, 2.5], "big": 2**70, "ключ": "значение"},
        "bio": [],
        "nested": {"deep": {"deeper": [{"k": "v"}]}},
    }
    added = await fleet.add_revision("wave", data, source=API)
    stored = await fleet.head("wave")
    assert stored is not None
    assert added.character == stored.character == data
    assert stored.digest == character_digest(data)


async def test_expected_head_refuses_a_moved_head(fleet: FleetStore) -> None:
    await fleet.add_revision("harbor", character("Harbor"), source=API, expected_head=0)
    with pytest.raises(RevisionConflict) as caught:
        await fleet.add_revision("harbor", character("Harbor 2"), source=API, expected_head=0)
    assert (caught.value.agent_id, caught.value.expected, caught.value.actual) == ("harbor", 0, 1)
    assert "revision 1, not 0" in str(caught.value)
    two = await fleet.add_revision("harbor", character("Harbor 2"), source=API, expected_head=1)
    assert two.number == 2
    with pytest.raises(RevisionConflict):
        await fleet.add_revision("tide", character("Tide"), source=API, expected_head=3)
    assert await fleet.head("tide") is None
    assert [c.detail["revision"] for c in await fleet.changes(0)] == [1, 2]  # none for refusals


async def test_revisions_page_newest_first(fleet: FleetStore) -> None:
    for n in range(5):
        await fleet.add_revision("harbor", character(f"Harbor {n}"), source=API)
    await fleet.add_revision("tide", character("Tide"), source=API)

    async def numbers(**kw: Any) -> list[int]:
        return [r.number for r in await fleet.revisions("harbor", **kw)]

    assert await numbers() == [5, 4, 3, 2, 1]
    assert await numbers(limit=2) == [5, 4]
    assert await numbers(limit=2, before=4) == [3, 2]
    assert await numbers(limit=2, before=2) == [1]
    assert await numbers(before=1) == []
    assert await fleet.revisions("nobody") == []


async def test_head_and_revision_lookups(fleet: FleetStore) -> None:
    assert await fleet.head("harbor") is None
    await fleet.add_revision("harbor", character("Harbor"), source=API)
    second = await fleet.add_revision("harbor", character("Harbor 2"), source=API)
    assert await fleet.head("harbor") == second
    one = await fleet.revision("harbor", 1)
    assert one is not None and one.character == character("Harbor")
    assert await fleet.revision("harbor", 3) is None
    assert await fleet.revision("tide", 1) is None


# -- desired state -----------------------------------------------------------------------------
async def test_desired_state_set_get_all(fleet: FleetStore, clock: ManualClock) -> None:
    assert await fleet.desired("harbor") is None
    assert await fleet.all_desired() == []
    running = await fleet.set_desired("harbor", RUNNING, actor="admin")
    clock.advance(3)
    stopped = await fleet.set_desired("anchor", STOPPED, placement="eu")
    assert (running.agent_id, running.state, running.placement) == ("harbor", RUNNING, None)
    assert (running.actor, running.updated_at) == ("admin", T0)
    assert (stopped.state, stopped.placement, stopped.actor) == (STOPPED, "eu", None)
    assert stopped.updated_at == at(3) and is_utc(stopped.updated_at)
    assert await fleet.desired("harbor") == running
    assert await fleet.all_desired() == [stopped, running]  # by agent id


async def test_placement_unchanged_keeps_the_stored_one(fleet: FleetStore) -> None:
    assert (await fleet.set_desired("harbor", RUNNING)).placement is None
    assert (await fleet.set_desired("harbor", RUNNING, placement="eu")).placement == "eu"
    kept = await fleet.set_desired("harbor", STOPPED, actor="ops")
    assert (kept.state, kept.placement, kept.actor) == (STOPPED, "eu", "ops")
    cleared = await fleet.set_desired("harbor", RUNNING, placement=None)
    assert cleared.placement is None
    assert await fleet.desired("harbor") == cleared


async def test_each_desired_state_is_logged_even_the_same(fleet: FleetStore) -> None:
    await fleet.set_desired("harbor", RUNNING, placement="eu")
    await fleet.set_desired("harbor", RUNNING)
    changes = await fleet.changes(0)
    assert [(c.kind, c.agent_id) for c in changes] == [(ChangeKind.DESIRED, "harbor")] * 2
    assert [c.detail for c in changes] == [{"state": "running", "placement": "eu"}] * 2


# -- imports -----------------------------------------------------------------------------------
async def test_import_marks_are_replaced(fleet: FleetStore) -> None:
    assert await fleet.import_mark("harbor") is None
    first = ImportMark(
        agent_id="harbor", path="characters/harbor.yaml", file_digest="d1", revision=1, at=T0
    )
    await fleet.mark_import(first)
    assert await fleet.import_mark("harbor") == first
    later = first.model_copy(update={"file_digest": "d2", "revision": 3, "at": at(60)})
    await fleet.mark_import(later)
    stored = await fleet.import_mark("harbor")
    assert stored == later
    assert stored is not None and is_utc(stored.at)
    assert await fleet.changes(0) == []  # an import mark is no change to apply


# -- agents ------------------------------------------------------------------------------------
async def test_delete_agent_drops_everything_and_logs_it(fleet: FleetStore) -> None:
    for name in ("harbor", "tide"):
        await fleet.add_revision(name, character(name), source=API)
        await fleet.add_revision(name, character(name, v=2), source=API)
        await fleet.set_desired(name, RUNNING)
        await fleet.mark_import(
            ImportMark(agent_id=name, path=f"{name}.json", file_digest="d", revision=2)
        )
    await fleet.delete_agent("harbor")
    assert await fleet.head("harbor") is None
    assert await fleet.revisions("harbor") == []
    assert await fleet.desired("harbor") is None
    assert await fleet.import_mark("harbor") is None
    assert [d.agent_id for d in await fleet.all_desired()] == ["tide"]
    assert len(await fleet.revisions("tide")) == 2
    assert await fleet.import_mark("tide") is not None
    last = (await fleet.changes(0))[-1]
    assert (last.kind, last.agent_id, last.detail) == (ChangeKind.DELETED, "harbor", {})
    # An agent made again under the same id is a new agent: its revisions start again.
    again = await fleet.add_revision("harbor", character("Harbor"), source=API)
    assert again.number == 1


# -- the change log ----------------------------------------------------------------------------
async def test_an_empty_log(fleet: FleetStore) -> None:
    assert await fleet.latest_seq() == 0
    assert await fleet.changes(0) == []


async def test_changes_in_order_after_a_seq(feed: FleetStore, clock: ManualClock) -> None:
    await feed.add_revision("harbor", character("Harbor"), source=RevisionSource.FILE)
    clock.advance(1)
    await feed.set_desired("harbor", RUNNING)
    clock.advance(1)
    config = await feed.append_change(ChangeKind.CLIENT_CONFIG, detail={"client": "discord"})
    bare = await feed.append_change(ChangeKind.CLIENT_CONFIG, "harbor")
    changes = await feed.changes(0)
    assert [c.kind for c in changes] == [
        ChangeKind.CHARACTER,
        ChangeKind.DESIRED,
        ChangeKind.CLIENT_CONFIG,
        ChangeKind.CLIENT_CONFIG,
    ]
    seqs = [c.seq for c in changes]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4 and seqs[0] >= 1
    assert changes[0].detail == {"revision": 1, "source": "file"}
    assert [c.at for c in changes] == [T0, at(1), at(2), at(2)]
    assert all(is_utc(c.at) for c in changes)
    assert changes[2:] == [config, bare]
    assert (config.agent_id, config.detail) == (None, {"client": "discord"})
    assert (bare.agent_id, bare.detail) == ("harbor", {})
    assert await feed.latest_seq() == bare.seq
    assert await feed.changes(seqs[1]) == changes[2:]
    assert await feed.changes(seqs[0], limit=2) == changes[1:3]
    assert await feed.changes(bare.seq) == []


async def test_wait_changes_returns_what_is_there_at_once(feed: FleetStore) -> None:
    change = await feed.append_change(ChangeKind.DESIRED, "harbor")
    found = await asyncio.wait_for(feed.wait_changes(0, wait_s=60), BOUND_S)
    assert found == [change]


async def test_wait_changes_is_empty_after_the_wait(feed: FleetStore) -> None:
    await feed.append_change(ChangeKind.DESIRED, "harbor")
    assert await feed.wait_changes(await feed.latest_seq(), wait_s=0.05) == []
    assert await feed.wait_changes(await feed.latest_seq(), wait_s=0) == []


async def test_a_writer_in_another_task_wakes_a_waiter(feed: FleetStore) -> None:
    seen = await feed.latest_seq()
    waiter = asyncio.create_task(feed.wait_changes(seen, wait_s=60))
    await asyncio.sleep(0.01)
    written = await feed.set_desired("harbor", RUNNING)
    found = await asyncio.wait_for(waiter, BOUND_S)
    assert [(c.kind, c.agent_id) for c in found] == [(ChangeKind.DESIRED, written.agent_id)]


async def test_a_writer_on_another_connection_wakes_a_waiter(
    feed_factory: FleetFactory, clock: ManualClock
) -> None:
    async with feed_factory.new_store(clock) as follower, feed_factory.new_store(clock) as writer:
        seen = await follower.latest_seq()
        waiter = asyncio.create_task(follower.wait_changes(seen, wait_s=60))
        await asyncio.sleep(0.01)
        await writer.add_revision("harbor", character("Harbor"), source=API)
        found = await asyncio.wait_for(waiter, BOUND_S)
        assert [(c.kind, c.agent_id) for c in found] == [(ChangeKind.CHARACTER, "harbor")]


async def test_prune_keeps_the_newest(fleet: FleetStore, clock: ManualClock) -> None:
    first = await fleet.append_change(ChangeKind.DESIRED, "a")
    clock.advance(10)
    await fleet.append_change(ChangeKind.DESIRED, "b")
    clock.advance(10)
    newest = await fleet.append_change(ChangeKind.DESIRED, "c")
    assert await fleet.prune_changes(at(5)) == 1
    assert [c.agent_id for c in await fleet.changes(first.seq - 1)] == ["b", "c"]
    assert await fleet.prune_changes(at(3600)) == 1
    assert await fleet.changes(0) == [newest]
    assert await fleet.latest_seq() == newest.seq
    after = await fleet.append_change(ChangeKind.DESIRED, "d")
    assert after.seq > newest.seq


# -- leases ------------------------------------------------------------------------------------
async def test_acquire_a_free_lease(fleet: FleetStore) -> None:
    lease = await fleet.acquire("discord:abc", "w1", ttl_s=15, detail={"agent": "harbor"})
    assert lease is not None
    assert (lease.name, lease.owner, lease.detail) == ("discord:abc", "w1", {"agent": "harbor"})
    assert (lease.acquired_at, lease.renewed_at, lease.expires_at) == (T0, T0, at(15))
    assert all(is_utc(t) for t in (lease.acquired_at, lease.renewed_at, lease.expires_at))
    assert await fleet.lease("discord:abc") == lease
    assert await fleet.lease("discord:other") is None


async def test_a_lease_held_by_another_is_refused(fleet: FleetStore, clock: ManualClock) -> None:
    held = await fleet.acquire("L", "w1", ttl_s=15)
    clock.advance(14)
    assert await fleet.acquire("L", "w2", ttl_s=15) is None
    assert await fleet.lease("L") == held


async def test_an_expired_lease_is_taken_by_another(fleet: FleetStore, clock: ManualClock) -> None:
    await fleet.acquire("L", "w1", ttl_s=15, detail={"pid": 1})
    clock.advance(15)  # expires_at <= now: expired
    taken = await fleet.acquire("L", "w2", ttl_s=15)
    assert taken is not None
    assert (taken.owner, taken.acquired_at, taken.expires_at, taken.detail) == (
        "w2",
        at(15),
        at(30),
        {},
    )
    assert not await fleet.renew("L", "w1", ttl_s=15)  # w1 lost it
    assert await fleet.lease("L") == taken


async def test_acquiring_ones_own_lease_renews_it(fleet: FleetStore, clock: ManualClock) -> None:
    await fleet.acquire("L", "w1", ttl_s=15, detail={"pid": 1})
    clock.advance(10)
    renewed = await fleet.acquire("L", "w1", ttl_s=15)
    assert renewed is not None
    assert (renewed.acquired_at, renewed.renewed_at, renewed.expires_at) == (T0, at(10), at(25))
    assert renewed.detail == {"pid": 1}  # kept when none is given
    changed = await fleet.acquire("L", "w1", ttl_s=15, detail={"pid": 2})
    assert changed is not None and changed.detail == {"pid": 2}


async def test_renew_extends_only_the_owners_lease(fleet: FleetStore, clock: ManualClock) -> None:
    await fleet.acquire("L", "w1", ttl_s=15)
    clock.advance(10)
    assert await fleet.renew("L", "w1", ttl_s=20)
    lease = await fleet.lease("L")
    assert lease is not None
    assert (lease.acquired_at, lease.renewed_at, lease.expires_at) == (T0, at(10), at(30))
    assert not await fleet.renew("L", "w2", ttl_s=20)
    assert not await fleet.renew("missing", "w1", ttl_s=20)


async def test_release(fleet: FleetStore, clock: ManualClock) -> None:
    await fleet.acquire("L", "w1", ttl_s=15)
    assert not await fleet.release("L", "w2")
    assert await fleet.lease("L") is not None
    assert await fleet.release("L", "w1")
    assert await fleet.lease("L") is None
    assert not await fleet.release("L", "w1")
    assert not await fleet.renew("L", "w1", ttl_s=15)
    taken = await fleet.acquire("L", "w2", ttl_s=15)  # at once: no wait for an expiry
    assert taken is not None and taken.owner == "w2"


async def test_an_expired_lease_is_still_shown(fleet: FleetStore, clock: ManualClock) -> None:
    held = await fleet.acquire("L", "w1", ttl_s=15)
    clock.advance(60)
    assert await fleet.lease("L") == held


async def test_leases_by_prefix(fleet: FleetStore) -> None:
    for name in ("room:2", "discord:b", "discord:a", "discordx", "room:1"):
        await fleet.acquire(name, "w1", ttl_s=15)
    assert [lease.name for lease in await fleet.leases("discord:")] == ["discord:a", "discord:b"]
    assert [lease.name for lease in await fleet.leases("room:")] == ["room:1", "room:2"]
    assert len(await fleet.leases()) == 5
    assert await fleet.leases("nothing") == []
    assert await fleet.leases("disc.*") == []  # a prefix, not a pattern


# -- concurrency -------------------------------------------------------------------------------
async def test_concurrent_revisions_get_consecutive_numbers(
    fleet_factory: FleetFactory, clock: ManualClock
) -> None:
    async with fleet_factory.new_store(clock) as one, fleet_factory.new_store(clock) as two:

        async def add(store: FleetStore, tag: str) -> list[int]:
            return [
                (await store.add_revision("harbor", character(f"{tag}{n}"), source=API)).number
                for n in range(8)
            ]

        # Two tasks on each of two connections (two processes' worth).
        made = await asyncio.gather(add(one, "a"), add(one, "b"), add(two, "c"), add(two, "d"))
        numbers = sorted(n for batch in made for n in batch)
        assert numbers == list(range(1, 33))
        assert [r.number for r in await one.revisions("harbor", limit=100)] == numbers[::-1]
        logged = [c.detail["revision"] for c in await two.changes(0)]
        assert sorted(logged) == numbers


async def test_two_owners_racing_for_a_lease_one_wins(
    fleet_factory: FleetFactory, clock: ManualClock
) -> None:
    async with fleet_factory.new_store(clock) as one, fleet_factory.new_store(clock) as two:
        for n in range(5):
            name = f"discord:{n}"
            got = await asyncio.gather(
                one.acquire(name, "w1", ttl_s=15),
                two.acquire(name, "w2", ttl_s=15),
                one.acquire(name, "w3", ttl_s=15),
                two.acquire(name, "w4", ttl_s=15),
            )
            winners = [lease for lease in got if lease is not None]
            assert len(winners) == 1
            stored = await one.lease(name)
            assert stored is not None and stored.owner == winners[0].owner


# -- lifecycle ---------------------------------------------------------------------------------
async def test_a_newer_schema_is_refused(fleet_factory: FleetFactory, clock: ManualClock) -> None:
    async with fleet_factory.new_store(clock):
        pass
    fleet_factory.set_schema_version(99)
    with pytest.raises(StoreError, match="newer than this Carrier supports"):
        async with fleet_factory.new_store(clock):
            pass


async def test_a_closed_store_says_how_to_open_it(
    fleet_factory: FleetFactory, clock: ManualClock
) -> None:
    store = fleet_factory.new_store(clock)
    with pytest.raises(StoreError, match="is not open"):
        await store.head("harbor")


async def test_reopening_keeps_everything(fleet_factory: FleetFactory, clock: ManualClock) -> None:
    async with fleet_factory.new_store(clock) as store:
        rev = await store.add_revision("harbor", character("Harbor"), source=API)
        await store.set_desired("harbor", RUNNING)
        lease = await store.acquire("L", "w1", ttl_s=15)
    store = fleet_factory.new_store(clock)
    async with store:
        assert await store.head("harbor") == rev
        assert await store.lease("L") == lease
        seq = await store.latest_seq()
    async with store:  # the same object again
        assert await store.latest_seq() == seq == 2
