"""The Store contract, status part: set_memory_status as a compare-and-set, what the outbox claims
replies with (``carrier.outbox``). Every backend in ``conftest.STORE_FACTORIES`` runs it."""

from __future__ import annotations

import asyncio

from carrier.memory.base import Store
from carrier.types import MemoryStatus
from tests.memory.conftest import StoreFactory
from tests.memory.test_store_contract import AGENT, make_memory

PENDING, SENDING, SENT = MemoryStatus.PENDING, MemoryStatus.SENDING, MemoryStatus.SENT


async def test_store_set_memory_status_says_whether_it_changed_a_memory(store: Store) -> None:
    memory = await store.add_memory(make_memory(status=MemoryStatus.RECEIVED))
    assert await store.set_memory_status(memory.id, MemoryStatus.PROCESSED) is True
    assert await store.set_memory_status("missing", MemoryStatus.PROCESSED) is False
    assert await store.set_memory_status("missing", SENT, expect=[PENDING]) is False
    assert await store.count_memories(agent_id=AGENT) == 1


async def test_store_set_memory_status_with_expect_changes_only_from_those(store: Store) -> None:
    reply = await store.add_memory(make_memory(status=PENDING))

    assert await store.set_memory_status(reply.id, SENT, expect=[SENDING]) is False
    got = await store.get_memory(reply.id)
    assert got is not None and got.status is PENDING and got.updated_at == reply.updated_at

    assert await store.set_memory_status(reply.id, SENDING, expect=[PENDING, SENDING]) is True
    assert await store.set_memory_status(reply.id, SENDING, expect=[PENDING]) is False
    assert await store.set_memory_status(reply.id, SENT, expect=[]) is False
    got = await store.get_memory(reply.id)
    assert got is not None and got.status is SENDING

    failed = "not delivered: 403 Forbidden"
    changed = await store.set_memory_status(
        reply.id, MemoryStatus.FAILED, error=failed, expect=[SENDING]
    )
    assert changed is True
    got = await store.get_memory(reply.id)
    assert got is not None and (got.status, got.error) == (MemoryStatus.FAILED, failed)
    assert got.updated_at > reply.updated_at


async def test_store_claims_race_and_exactly_one_wins(
    store: Store, store_factory: StoreFactory
) -> None:
    """Two processes (two stores over one database) claim the same replies at once."""
    replies = [await store.add_memory(make_memory(f"r{i}", status=PENDING)) for i in range(20)]
    async with store_factory.new_store() as other:

        async def claim(s: Store, memory_id: str) -> bool:
            return await s.set_memory_status(memory_id, SENDING, expect=[PENDING])

        for reply in replies:
            won = await asyncio.gather(claim(store, reply.id), claim(other, reply.id))
            assert sorted(won) == [False, True]
    claimed = await store.get_memories(agent_id=AGENT, statuses=[SENDING], limit=100)
    assert len(claimed) == 20


async def test_store_filters_by_the_delivery_statuses(store: Store) -> None:
    for i, status in enumerate([PENDING, SENDING, SENT, MemoryStatus.FAILED, PENDING]):
        await store.add_memory(make_memory(f"m{i}", seconds=i, status=status))
    pending = await store.get_memories(agent_id=AGENT, statuses=[PENDING, SENDING])
    assert [m.content.text for m in pending] == ["m4", "m1", "m0"]
