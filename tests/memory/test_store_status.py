"""The Store contract, status part: set_memory_status as a compare-and-set, what the outbox claims
replies with (``carrier.outbox``), and record_turn, what a turn leaves (its replies, its
message's vector and status) in one step. Every backend in ``conftest.STORE_FACTORIES`` runs it."""

from __future__ import annotations

import asyncio

import pytest

from carrier.memory.base import Store
from carrier.types import Content, MemoryStatus
from tests.memory.conftest import StoreFactory
from tests.memory.test_store_contract import AGENT, MODEL, make_memory

PENDING, SENDING, SENT = MemoryStatus.PENDING, MemoryStatus.SENDING, MemoryStatus.SENT
RECEIVED, PROCESSED, FAILED = MemoryStatus.RECEIVED, MemoryStatus.PROCESSED, MemoryStatus.FAILED


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


# -- record_turn: what a turn leaves, in one step ----------------------------------------------


async def _vector_of(store: Store, memory_id: str) -> list[float] | None:
    got = await store.get_memory(memory_id)
    assert got is not None
    return got.embedding


async def test_store_record_turn_stores_replies_vector_and_status(store: Store) -> None:
    message = await store.add_memory(make_memory("question", status=RECEIVED))
    replies = [make_memory(f"answer {i}", seconds=1 + i, status=PENDING) for i in range(2)]
    message.embedding, message.embedding_model = [0.0, 1.0, 0.0], MODEL

    record = await store.record_turn(
        message, PENDING, expect=[RECEIVED], replies=replies, vector=True
    )

    assert record.changed is True
    assert [(r.id, r.content.text, r.status) for r in record.replies] == [
        (r.id, r.content.text, PENDING) for r in replies
    ]
    assert record.replies == [await store.get_memory(r.id) for r in replies]  # as stored
    got = await store.get_memory(message.id)
    assert got is not None and (got.status, got.error) == (PENDING, None)
    assert got.content.text == "question" and got.embedding_model == MODEL
    assert got.embedding == pytest.approx([0.0, 1.0, 0.0])
    assert got.updated_at > message.updated_at
    # The vector is searchable, as one written by update_memory is.
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[0.0, 1.0, 0.0], embedding_model=MODEL, k=1
    )
    assert [h.memory.id for h in hits] == [message.id]
    assert await store.count_memories(agent_id=AGENT) == 3


async def test_store_record_turn_again_keeps_what_was_stored(store: Store) -> None:
    """A turn run again (a redelivered message) records its replies once, keeps their delivery
    status, and leaves a closed message closed; its vector is written all the same."""
    message = await store.add_memory(make_memory("question", status=RECEIVED))
    reply = make_memory("answer", seconds=1, status=PENDING)
    first = await store.record_turn(message, PENDING, expect=[RECEIVED], replies=[reply])
    assert first.changed is True
    assert await store.set_memory_status(reply.id, SENT, expect=[PENDING])
    assert await store.set_memory_status(message.id, PROCESSED, expect=[PENDING])

    message.embedding, message.embedding_model = [1.0, 0.0, 0.0], MODEL
    fresh = make_memory("another answer", seconds=2, status=PENDING)
    again = await store.record_turn(
        message,
        PENDING,
        expect=[RECEIVED],
        replies=[reply.model_copy(update={"content": Content(text="changed")}), fresh],
        vector=True,
    )

    assert again.changed is False
    assert [(r.id, r.content.text, r.status) for r in again.replies] == [
        (reply.id, "answer", SENT),
        (fresh.id, "another answer", PENDING),
    ]
    got = await store.get_memory(message.id)
    assert got is not None and got.status is PROCESSED
    assert got.embedding == pytest.approx([1.0, 0.0, 0.0])
    assert await store.count_memories(agent_id=AGENT) == 3


async def test_store_record_turn_without_vector_or_expectations(store: Store) -> None:
    message = await store.add_memory(
        make_memory("question", status=RECEIVED, embedding=[0.0, 0.0, 1.0])
    )
    # A vector in hand but vector=False: the stored one stays.
    message.embedding = [1.0, 0.0, 0.0]
    record = await store.record_turn(message, FAILED, error="the model failed")
    assert record == ([], True)
    got = await store.get_memory(message.id)
    assert got is not None and (got.status, got.error) == (FAILED, "the model failed")
    assert got.embedding == pytest.approx([0.0, 0.0, 1.0])

    # An empty ``expect`` changes no status (as set_memory_status), yet writes the vector.
    record = await store.record_turn(message, PROCESSED, expect=[], vector=True)
    assert record.changed is False
    got = await store.get_memory(message.id)
    assert got is not None and got.status is FAILED
    assert got.embedding == pytest.approx([1.0, 0.0, 0.0])


async def test_store_record_turn_of_a_message_that_is_gone(store: Store) -> None:
    """A message forgotten during its turn stays forgotten; the replies are stored."""
    message = make_memory("forgotten", status=RECEIVED, embedding=[0.0, 1.0, 0.0])
    reply = make_memory("answer", seconds=1, status=PENDING)
    record = await store.record_turn(
        message, PENDING, expect=[RECEIVED], replies=[reply], vector=True
    )
    assert record.changed is False and [r.id for r in record.replies] == [reply.id]
    assert await store.get_memory(message.id) is None
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[0.0, 1.0, 0.0], embedding_model=MODEL, k=5
    )
    assert message.id not in [h.memory.id for h in hits]


async def test_store_set_memory_vector_leaves_content_and_status(store: Store) -> None:
    """A vector written in the background (a delivered reply's) never undoes a status set
    meanwhile, nor the text."""
    reply = await store.add_memory(make_memory("answer", status=SENT))
    assert await store.set_memory_status(reply.id, SENDING, expect=[SENT])  # meanwhile
    stale = reply.model_copy(update={"content": Content(text="stale")})
    stale.embedding, stale.embedding_model = [0.0, 0.0, 1.0], MODEL

    assert await store.set_memory_vector(stale) is True

    got = await store.get_memory(reply.id)
    assert got is not None and (got.status, got.content.text) == (SENDING, "answer")
    assert got.embedding == pytest.approx([0.0, 0.0, 1.0]) and got.embedding_model == MODEL
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[0.0, 0.0, 1.0], embedding_model=MODEL, k=1
    )
    assert [h.memory.id for h in hits] == [reply.id]

    stale.embedding = stale.embedding_model = None  # dropped
    assert await store.set_memory_vector(stale) is True
    got = await store.get_memory(reply.id)
    assert got is not None and got.embedding is None and got.embedding_model is None
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[0.0, 0.0, 1.0], embedding_model=MODEL, k=1
    )
    assert hits == []
    assert await store.set_memory_vector(make_memory("gone", embedding=[1.0, 0, 0])) is False
