"""An account made of several connections (a Discord bot with a shard count): each part is
leased on its own, so the processes sharing a store spread an account's parts like separate
accounts, take a lost part back, and settle only what came through the part they take. Agent
managers on one SQLite file, as processes with their own ids (short leases, as in
``test_connection_leases.py``); the Discord shards themselves, with real processes, are in
``tests/deploy/test_shards.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from carrier.agents.reports import merge_elsewhere
from carrier.character import parse_character
from carrier.clients import Client, ClientStatus, ConnectionPart, skipped_state, states_of
from carrier.fleet.presence import WORKER_PREFIX
from carrier.memory.sqlite import SQLiteStore
from carrier.outbox import INTERRUPTED
from carrier.types import Content, Memory, MemoryStatus, utcnow
from tests.fleet.test_connection_leases import Hosts, left_turn, until

pytestmark = pytest.mark.asyncio

PARTS = 4


class PartClient(Client):
    name = "chat"

    def __init__(self, agent: str, config: Mapping[str, Any]) -> None:
        self.agent = agent
        self.config = dict(config)
        self.stopped = False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True

    def update_config(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)


def _covers(part: int) -> Any:
    return lambda inbound: inbound.content.metadata.get("part") == part


class PartedFactory:
    """A ``chat`` account of four parts (part ``i`` owns the messages whose metadata says so)."""

    def __init__(self) -> None:
        self.made: list[PartClient] = []

    def __call__(self, runtime: Any, config: Mapping[str, Any], env: Mapping[str, str]) -> Client:
        client = PartClient(runtime.agent_id, config)
        self.made.append(client)
        return client

    @staticmethod
    def connection_key(
        character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
    ) -> str | None:
        return "account-digest"

    @staticmethod
    def connection_parts(
        character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
    ) -> list[ConnectionPart]:
        return [
            ConnectionPart(name=f"{i}/{PARTS}", config={"part": i}, covers=_covers(i))
            for i in range(PARTS)
        ]

    def live(self) -> list[PartClient]:
        return [c for c in self.made if not c.stopped]

    def parts(self) -> list[int]:
        return sorted(c.config["part"] for c in self.live())


PILOT = {"name": "Pilot", "bio": ["Guides ships."], "clients": ["chat"]}


@pytest.fixture
async def hosts(tmp_path: Path) -> AsyncIterator[Hosts]:
    made = Hosts(tmp_path)
    made.factory = PartedFactory()  # type: ignore[assignment]
    try:
        yield made
    finally:
        await made.close()


async def _left(store: SQLiteStore, agent_id: str, part: int, *, reply: bool = False) -> str:
    """A turn a stopped process left on ``part`` (received; or pending with a pending reply)."""
    return await left_turn(
        store,
        agent_id,
        "chat",
        reply=reply,
        room=f"room-{part}",
        text=f"hello {part}",
        answer=f"ahoy {part}",
        metadata={"part": part},
    )


async def _status(store: SQLiteStore, memory_id: str) -> MemoryStatus:
    memory = await store.get_memory(memory_id)
    assert memory is not None
    return memory.status


async def test_the_parts_of_one_account_spread_over_two_workers(hosts: Hosts) -> None:
    one, two = await hosts.new("worker-1"), await hosts.new("worker-2")
    factory: PartedFactory = hosts.factory  # type: ignore[assignment]
    fleet = await one.fleet()
    for worker in ("worker-1", "worker-2"):  # both live (carrier run holds these)
        await fleet.acquire(WORKER_PREFIX + worker, worker, ttl_s=60)
    record = await one.create(parse_character(PILOT))
    await one.run(record.id)
    await two.run(record.id)
    await until(lambda: len(factory.live()) == PARTS, "every part runs")
    assert factory.parts() == list(range(PARTS)), "each part runs once"
    leases = await fleet.leases("conn:chat:")
    assert sorted(lease.name for lease in leases) == [
        f"conn:chat:account-digest#{i}/{PARTS}" for i in range(PARTS)
    ]
    owners = [lease.owner for lease in leases]
    assert sorted(owners) == ["worker-1"] * 2 + ["worker-2"] * 2, owners

    # Each process shows its own parts as clients, the others' as running elsewhere.
    status = await one.status(record.id)
    assert len(status.clients) == 2 and all(c.startswith("chat#") for c in status.clients)
    assert len(status.skipped) == 2
    assert all(
        skipped_state(why).status is ClientStatus.ELSEWHERE for why in status.skipped.values()
    )
    assert one.client(record.id, "chat") is not None  # by client name: a part running here

    # A configuration change reaches every part, each keeping its own part setting.
    await one.set_client_config(f"{record.id}:chat", {"greeting": "ahoy"})
    here = [c for c in factory.live() if c in one._running[record.id].clients.values()]
    assert len(here) == 2
    assert all(c.config.get("greeting") == "ahoy" for c in here)
    assert sorted(c.config["part"] for c in factory.live()) == list(range(PARTS))

    # A graceful stop hands its parts over: the other worker runs all four.
    await one.close()
    await until(
        lambda: len(two._running[record.id].clients) == PARTS, "worker-2 takes the parts over"
    )
    assert factory.parts() == list(range(PARTS))


async def test_taking_one_part_over_settles_that_part_only(hosts: Hosts) -> None:
    one = await hosts.new("worker-1")
    factory: PartedFactory = hosts.factory  # type: ignore[assignment]
    store = one.store
    record = await one.create(parse_character(PILOT))
    await one.run(record.id)
    assert factory.parts() == list(range(PARTS))
    fleet = await one.fleet()
    part_lease = f"conn:chat:account-digest#1/{PARTS}"

    # Part 1 is lost to another process (this one stalled past its expiry, say) ...
    await fleet.release(part_lease, "worker-1")
    assert await fleet.acquire(part_lease, "intruder", ttl_s=0.8) is not None
    await until(lambda: factory.parts() == [0, 2, 3], "part 1's client stops")
    # ... which leaves turns unfinished there; parts 2 and 3 are busy with their own here.
    on_one = await _left(store, record.id, 1)
    on_two = await _left(store, record.id, 2)
    reply_on_one = await _left(store, record.id, 1, reply=True)
    reply_on_three = await _left(store, record.id, 3, reply=True)

    # The intruder dies; part 1 is taken back and what it left is settled, and only that.
    # (The takeover's recovery runs before the part's client starts: Connections.start.)
    await until(lambda: factory.parts() == list(range(PARTS)), "part 1 taken back")
    assert await _status(store, on_one) is MemoryStatus.FAILED
    assert (await store.get_memory(on_one)).error == INTERRUPTED  # type: ignore[union-attr]
    assert await _status(store, on_two) is MemoryStatus.RECEIVED

    # Replies left unsent: a part's client sends its own only.
    runtime = one.runtime(record.id)
    sent: list[str] = []

    async def send(reply: Memory) -> None:
        sent.append(reply.content.text)

    assert await runtime.outbox.redeliver("chat", send, where=_covers(1)) == 1
    assert sent == ["ahoy 1"]
    assert await _status(store, reply_on_one) is MemoryStatus.PROCESSED
    assert await _status(store, reply_on_three) is MemoryStatus.PENDING


async def test_the_web_shows_each_part_as_the_worker_running_it_reports_it(hosts: Hosts) -> None:
    web = await hosts.new("web", clients=False)
    one, two = await hosts.new("worker-1", api=False), await hosts.new("worker-2", api=False)
    factory: PartedFactory = hosts.factory  # type: ignore[assignment]
    fleet = await web.fleet()
    for worker in ("worker-1", "worker-2"):
        await fleet.acquire(WORKER_PREFIX + worker, worker, ttl_s=60)
    record = await web.create(parse_character(PILOT))
    await web.run(record.id)
    await one.run(record.id)
    await two.run(record.id)
    await until(lambda: len(factory.live()) == PARTS, "every part runs")
    for worker in (one, two):
        await worker.reports.publish()

    local = states_of({}, (await web.status(record.id)).skipped, elsewhere=True)
    assert list(local) == ["chat"]  # the web runs no client: the account shown whole
    shown = merge_elsewhere(local, await web.reports.elsewhere(record.id))
    assert sorted(shown) == [f"chat#{i}/{PARTS}" for i in range(PARTS)]
    assert {s.status for s in shown.values()} == {ClientStatus.CONNECTED}
    assert sorted(s.process or "" for s in shown.values()) == ["worker-1"] * 2 + ["worker-2"] * 2

    # A worker that stops says so; its parts, taken over, are reported by the other.
    await fleet.release(WORKER_PREFIX + "worker-1", "worker-1")
    await one.close()
    await until(lambda: len(two._running[record.id].clients) == PARTS, "worker-2 takes over")
    await two.reports.publish()
    shown = merge_elsewhere(local, await web.reports.elsewhere(record.id))
    assert {s.process for s in shown.values()} == {"worker-2"} and len(shown) == PARTS


class ResumingClient(PartClient):
    """A client that can run again what the previous holder left (as Discord's does)."""

    def __init__(self, agent: str, config: Mapping[str, Any]) -> None:
        super().__init__(agent, config)
        self.resumed: list[str] = []

    def resume(self, messages: list[Memory]) -> None:
        self.resumed += [m.id for m in messages]


async def test_a_takeover_hands_fresh_unanswered_messages_to_a_client_that_can_run_them(
    hosts: Hosts,
) -> None:
    factory: PartedFactory = hosts.factory  # type: ignore[assignment]
    made: list[ResumingClient] = []

    def resuming(runtime: Any, config: Mapping[str, Any], env: Mapping[str, str]) -> Client:
        client = ResumingClient(runtime.agent_id, config)
        made.append(client)
        factory.made.append(client)
        return client

    resuming.connection_key = factory.connection_key  # type: ignore[attr-defined]
    resuming.connection_parts = factory.connection_parts  # type: ignore[attr-defined]
    hosts.factory = resuming  # type: ignore[assignment]
    one = await hosts.new("worker-1")
    store = one.store
    record = await one.create(parse_character(PILOT))
    fleet = await one.fleet()
    part_lease = f"conn:chat:account-digest#2/{PARTS}"
    # A previous holder of part 2 stopped mid-turn: one fresh message, one from long ago.
    fresh = await _left(store, record.id, 2)
    at = utcnow() - timedelta(hours=1)
    old = await store.add_memory(
        Memory(
            agent_id=record.id,
            room_id="room-2",
            entity_id="ana",
            content=Content(text="an hour ago", source="chat", metadata={"part": 2}),
            status=MemoryStatus.RECEIVED,
            created_at=at,
            updated_at=at,
        )
    )
    await one.run(record.id)
    assert await fleet.lease(part_lease) is not None
    [client] = [c for c in made if c.config["part"] == 2]
    assert client.resumed == [fresh]  # left received for the client to run again
    assert await _status(store, fresh) is MemoryStatus.RECEIVED
    assert await _status(store, old.id) is MemoryStatus.FAILED  # too old to answer now
    assert all(c.resumed == [] for c in made if c is not client)
