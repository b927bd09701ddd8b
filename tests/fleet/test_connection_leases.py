"""Connection leases (``carrier/agents/leases.py``, ``carrier/agents/connections.py``): agent
managers on one SQLite file, as processes with their own ids, and a client whose factory names
the account it connects as. Short leases (1 s) so handovers happen within the test; the real
processes and their real timings are in ``tests/deploy/test_workers.py``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from carrier.agents import AgentManager
from carrier.character import parse_character
from carrier.clients import Client, ClientStatus, skipped_state
from carrier.fleet.presence import WORKER_PREFIX
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.outbox import INTERRUPTED, reply_id
from carrier.settings import load_settings
from carrier.types import Content, Memory, MemoryKind, MemoryStatus, stable_id, utcnow

pytestmark = pytest.mark.asyncio

LEASES = {"ttl_s": 1.0, "beat_s": 0.25, "retry_s": 0.1, "defer_s": 0.6}


class FakeClient(Client):
    name = "chat"

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.started = self.stopped = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True


class Factory:
    """Clients of the ``chat`` platform; each character's account is its ``TOKEN`` secret."""

    def __init__(self) -> None:
        self.made: list[FakeClient] = []

    def __call__(self, runtime: Any, config: Mapping[str, Any], env: Mapping[str, str]) -> Client:
        client = FakeClient(runtime.agent_id)
        self.made.append(client)
        return client

    @staticmethod
    def connection_key(
        character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
    ) -> str | None:
        token = character.resolve_secret("TOKEN", environ)
        return f"digest-of-{token}" if token else None

    def live(self, agent: str | None = None) -> list[FakeClient]:
        return [c for c in self.made if not c.stopped and agent in (None, c.agent)]


def pilot(name: str = "Pilot", token: str = "$TOKEN_A") -> dict[str, Any]:
    return {
        "name": name,
        "bio": ["Guides ships."],
        "clients": ["chat"],
        "secrets": {"TOKEN": token},
    }


async def until(check: Callable[[], bool], what: str) -> None:
    """Bounded against hanging; not a measure of speed."""
    for _ in range(800):
        if check():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never: {what}")


class Hosts:
    """Agent managers on one store file, each as a process with its own id."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.settings = load_settings({"CARRIER_DATA_DIR": str(tmp_path / "data")})
        self.model = FunctionModel(lambda request: "<response><text>ok</text></response>")
        self.factory = Factory()
        self.made: list[tuple[AgentManager, SQLiteStore]] = []

    async def new(self, worker: str, *, clients: bool = True, api: bool = True) -> AgentManager:
        store = SQLiteStore(path=self.tmp_path / "carrier.db")
        await store.open()
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=self.settings,
            environ={"CARRIER_WORKER_ID": worker, "TOKEN_A": "a", "TOKEN_B": "b"},
            model_factory=lambda character: self.model,
            client_factories={"chat": self.factory},
            start_clients=clients,
            serves_api=api,
            lease_options=LEASES,
        )
        self.made.append((manager, store))
        return manager

    async def close(self) -> None:
        for manager, store in self.made:
            await manager.close()
            await store.close()


@pytest.fixture
async def hosts(tmp_path: Path) -> AsyncIterator[Hosts]:
    made = Hosts(tmp_path)
    try:
        yield made
    finally:
        await made.close()


async def test_one_process_connects_the_other_takes_over_when_it_stops(hosts: Hosts) -> None:
    one, two = await hosts.new("worker-1"), await hosts.new("worker-2")
    factory = hosts.factory
    record = await one.create(parse_character(pilot()))
    assert (await one.start(record.id)).clients == ["chat"]
    status = await two.run(record.id)
    assert status.clients == []
    reason = status.skipped["chat"]
    assert "held by worker-1" in reason
    assert skipped_state(reason).status is ClientStatus.ELSEWHERE
    assert len(factory.live()) == 1

    await one.close()  # a graceful stop: the lease is released with the client's stop
    await until(lambda: two.client(record.id, "chat") is not None, "worker-2 takes it over")
    assert len(factory.live()) == 1
    assert "chat" not in (await two.status(record.id)).skipped


async def test_two_agents_on_one_account_share_one_lease(hosts: Hosts) -> None:
    one, two = await hosts.new("worker-1"), await hosts.new("worker-2")
    first = await one.create(parse_character(pilot("Pilot")))
    second = await one.create(parse_character(pilot("Tug")))  # the same token
    for manager in (one, two):
        for record in (first, second):
            await manager.run(record.id)
    assert one.client(first.id, "chat") is not None and one.client(second.id, "chat") is not None
    assert two.client(first.id, "chat") is None and two.client(second.id, "chat") is None
    fleet = await one.fleet()
    assert [lease.owner for lease in await fleet.leases("conn:chat:")] == ["worker-1"]

    await one.halt(first.id)  # the other agent still uses the connection: kept
    await asyncio.sleep(LEASES["retry_s"] * 4)
    assert two.client(first.id, "chat") is None
    await one.halt(second.id)  # the last user gone: released, taken over
    await until(
        lambda: None not in (two.client(first.id, "chat"), two.client(second.id, "chat")),
        "both taken over together",
    )


async def test_a_lost_lease_stops_the_client_at_once(hosts: Hosts) -> None:
    one = await hosts.new("worker-1")
    factory = hosts.factory
    record = await one.create(parse_character(pilot()))
    await one.start(record.id)
    fleet = await one.fleet()
    [lease] = await fleet.leases("conn:chat:")
    # Another process took it (this one stalled past its expiry, say).
    await fleet.release(lease.name, "worker-1")
    assert await fleet.acquire(lease.name, "intruder", ttl_s=0.8) is not None
    await until(lambda: not factory.live(), "the client stops")
    assert "held by intruder" in (await one.status(record.id)).skipped["chat"]
    # The intruder's lease expires (it died): taken back.
    await until(lambda: len(factory.live()) == 1, "taken back once it is free")


async def test_a_worker_at_its_share_leaves_a_free_connection_to_one_with_fewer(
    hosts: Hosts,
) -> None:
    one, two = await hosts.new("worker-1"), await hosts.new("worker-2")
    factory = hosts.factory
    fleet = await one.fleet()
    for worker in ("worker-1", "worker-2"):  # both live (carrier run holds these)
        await fleet.acquire(WORKER_PREFIX + worker, worker, ttl_s=60)
    pilot_a = await one.create(parse_character(pilot("Pilot", "$TOKEN_A")))
    pilot_b = await one.create(parse_character(pilot("Tug", "$TOKEN_B")))
    await one.run(pilot_a.id)
    status = await one.run(pilot_b.id)  # one is its share of two connections over two workers
    assert "left to another worker" in status.skipped["chat"]
    await two.run(pilot_a.id)
    await two.run(pilot_b.id)
    await until(lambda: len(factory.live()) == 2, "each connection runs once")
    owners = {lease.owner for lease in await fleet.leases("conn:chat:")}
    assert owners == {"worker-1", "worker-2"}


async def test_a_share_is_not_kept_free_for_a_worker_that_never_takes_it(hosts: Hosts) -> None:
    one = await hosts.new("worker-1")
    factory = hosts.factory
    fleet = await one.fleet()
    await fleet.acquire(WORKER_PREFIX + "worker-2", "worker-2", ttl_s=60)  # live, runs nothing
    for name, token in (("Pilot", "$TOKEN_A"), ("Tug", "$TOKEN_B")):
        await one.run((await one.create(parse_character(pilot(name, token)))).id)
    assert len(factory.live()) == 1
    await until(lambda: len(factory.live()) == 2, "taken after the deferral")


async def left_turn(
    store: SQLiteStore,
    agent_id: str,
    platform: str,
    *,
    reply: bool = False,
    room: str | None = None,
    text: str = "hello",
    answer: str = "ahoy",
    metadata: dict[str, Any] | None = None,
) -> str:
    """A turn a stopped process left on ``platform``: the message (received, or pending with a
    fresh pending reply)."""
    at = utcnow() - timedelta(seconds=5)
    status = MemoryStatus.PENDING if reply else MemoryStatus.RECEIVED
    room = room or f"{platform}-room"
    inbound = await store.add_memory(
        Memory(
            agent_id=agent_id,
            room_id=room,
            entity_id="ana",
            content=Content(text=text, source=platform, metadata=dict(metadata or {})),
            status=status,
            created_at=at,
            updated_at=at,
        )
    )
    if reply:
        await store.add_memory(
            Memory(
                id=reply_id(inbound.id, 0),
                agent_id=agent_id,
                room_id=room,
                entity_id=stable_id(agent_id, "agent"),
                kind=MemoryKind.MESSAGE,
                content=Content(text=answer, source=platform, in_reply_to=inbound.id),
                status=MemoryStatus.PENDING,
                created_at=at,
                updated_at=at,
            )
        )
    return inbound.id


async def _status(store: SQLiteStore, memory_id: str) -> tuple[MemoryStatus, str | None]:
    memory = await store.get_memory(memory_id)
    assert memory is not None
    return memory.status, memory.error


async def test_each_process_settles_only_what_it_serves(hosts: Hosts) -> None:
    web = await hosts.new("web", clients=False)
    worker = await hosts.new("worker-1", api=False)
    store = web.store
    record = await web.create(parse_character(pilot()))
    api_left = await left_turn(store, record.id, "api")
    chat_left = await left_turn(store, record.id, "chat")
    chat_reply_left = await left_turn(store, record.id, "chat", reply=True)

    await web.run(record.id)  # the web serves the API: its turns only
    assert await _status(store, api_left) == (MemoryStatus.FAILED, INTERRUPTED)
    assert (await _status(store, chat_left))[0] is MemoryStatus.RECEIVED

    other = await hosts.new("worker-2", api=False)
    later_api = await left_turn(store, record.id, "api")
    await worker.run(record.id)  # takes the connection: settles the chat turns left before
    assert await _status(store, chat_left) == (MemoryStatus.FAILED, INTERRUPTED)
    assert (await _status(store, later_api))[0] is MemoryStatus.RECEIVED  # not a worker's
    # A fresh reply left unsent waits for the new holder's client, sent once it is connected.
    runtime = worker.runtime(record.id)
    sent: list[str] = []

    async def send(reply: Memory) -> None:
        sent.append(reply.content.text)

    assert await runtime.outbox.redeliver("chat", send) == 1
    assert sent == ["ahoy"]
    assert (await _status(store, chat_reply_left))[0] is MemoryStatus.PROCESSED

    # A worker that does not hold the connection settles nothing of it.
    newer = await left_turn(store, record.id, "chat")
    await other.run(record.id)
    assert other.client(record.id, "chat") is None
    assert (await _status(store, newer))[0] is MemoryStatus.RECEIVED


async def test_lease_timings_come_from_the_setting_in_proportion(tmp_path: Path) -> None:
    settings = load_settings(
        {"CARRIER_DATA_DIR": str(tmp_path / "data"), "CARRIER_CONNECTION_LEASE_SECONDS": "6"}
    )
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        manager = AgentManager(
            store=store,
            embedder=HashEmbedder(),
            settings=settings,
            environ={"CARRIER_WORKER_ID": "worker-1", "TOKEN_A": "a"},
            model_factory=lambda character: FunctionModel(lambda request: "ok"),
            client_factories={"chat": Factory()},
        )
        try:
            record = await manager.create(parse_character(pilot()))
            await manager.start(record.id)
            leases = manager.connections.leases
            assert leases is not None
            assert (leases.ttl_s, leases.beat_s, leases.retry_s, leases.defer_s) == (6, 2, 1, 4)
        finally:
            await manager.close()
