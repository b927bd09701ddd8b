"""The Store contract: every backend in ``conftest.STORE_FACTORIES`` must pass all of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from carrier.errors import StoreError
from carrier.memory.base import Store
from carrier.memory.fake import HashEmbedder
from carrier.types import (
    AgentRecord,
    Attachment,
    Content,
    Entity,
    Memory,
    MemoryKind,
    MemoryStatus,
    Room,
    RoomKind,
    RoomState,
)
from tests.memory.conftest import StoreFactory

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
AGENT = "agent-1"
OTHER_AGENT = "agent-2"
MODEL = "test:3"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def make_memory(
    text: str = "hello",
    *,
    seconds: float = 0,
    agent_id: str = AGENT,
    room_id: str = "room-1",
    entity_id: str = "user-1",
    embedding: list[float] | None = None,
    embedding_model: str | None = None,
    **fields: Any,
) -> Memory:
    if embedding is not None and embedding_model is None:
        embedding_model = MODEL
    return Memory(
        agent_id=agent_id,
        room_id=room_id,
        entity_id=entity_id,
        content=Content(text=text),
        embedding=embedding,
        embedding_model=embedding_model,
        created_at=at(seconds),
        updated_at=at(seconds),
        **fields,
    )


def texts(memories: list[Memory]) -> list[str]:
    return [m.content.text for m in memories]


# -- agents ------------------------------------------------------------------------------------


async def test_store_agent_upsert_get_list(store: Store) -> None:
    agent = AgentRecord(
        id=AGENT, name="Ada", character={"name": "Ada", "bio": ["x"]}, created_at=T0
    )
    await store.upsert_agent(agent)
    await store.upsert_agent(
        AgentRecord(id=OTHER_AGENT, name="Bob", character={}, created_at=at(1))
    )

    got = await store.get_agent(AGENT)
    assert got == agent
    assert got is not None and got.created_at.tzinfo is not None
    assert sorted(a.id for a in await store.list_agents()) == [AGENT, OTHER_AGENT]
    assert await store.get_agent("missing") is None


async def test_store_agent_upsert_updates_and_keeps_created_at(store: Store) -> None:
    await store.upsert_agent(AgentRecord(id=AGENT, name="Ada", character={}, created_at=T0))
    await store.upsert_agent(
        AgentRecord(id=AGENT, name="Ada 2", character={"a": 1}, status="running", created_at=at(60))
    )
    got = await store.get_agent(AGENT)
    assert got is not None
    assert (got.name, got.character, got.status) == ("Ada 2", {"a": 1}, "running")
    assert got.created_at == T0
    assert len(await store.list_agents()) == 1


async def test_store_delete_agent_removes_everything_it_owns(store: Store) -> None:
    for agent_id in (AGENT, OTHER_AGENT):
        await store.upsert_agent(AgentRecord(id=agent_id, name=agent_id, character={}))
        room = Room(id=f"room-{agent_id}", agent_id=agent_id, platform="cli", platform_id="t")
        user = Entity(id=f"user-{agent_id}", agent_id=agent_id, platform="cli", platform_id="me")
        await store.upsert_room(room)
        await store.upsert_entity(user)
        await store.add_participant(room.id, user.id)
        await store.set_room_state(agent_id, room.id, RoomState.FOLLOWED)
        await store.add_memory(make_memory(agent_id=agent_id, room_id=room.id, entity_id=user.id))

    assert await store.delete_agent(AGENT) is True

    assert await store.get_agent(AGENT) is None
    assert await store.get_room(f"room-{AGENT}") is None
    assert await store.get_entity(f"user-{AGENT}") is None
    assert await store.list_participants(f"room-{AGENT}") == []
    assert await store.get_room_state(AGENT, f"room-{AGENT}") is None
    assert await store.count_memories(agent_id=AGENT) == 0
    # The other agent is untouched.
    assert await store.get_agent(OTHER_AGENT) is not None
    assert await store.get_room(f"room-{OTHER_AGENT}") is not None
    assert await store.get_entity(f"user-{OTHER_AGENT}") is not None
    assert await store.list_participants(f"room-{OTHER_AGENT}") == [f"user-{OTHER_AGENT}"]
    assert await store.get_room_state(OTHER_AGENT, f"room-{OTHER_AGENT}") is RoomState.FOLLOWED
    assert await store.count_memories(agent_id=OTHER_AGENT) == 1

    assert await store.delete_agent(AGENT) is False


# -- rooms, entities, participants -------------------------------------------------------------


async def test_store_room_round_trip_and_replace(store: Store) -> None:
    room = Room.model_validate(
        {
            "id": "r1",
            "agent_id": AGENT,
            "platform": "discord",
            "platform_id": "123",
            "name": "general",
            "kind": RoomKind.THREAD,
            "parent_id": "r0",
            "metadata": {"guild": "g1"},
            "topic": "extra fields are kept",
        }
    )
    await store.upsert_room(room)
    assert await store.get_room("r1") == room

    renamed = room.model_copy(update={"name": "off-topic", "metadata": {}})
    await store.upsert_room(renamed)
    assert await store.get_room("r1") == renamed
    assert await store.get_room("missing") is None


async def test_store_get_rooms_reads_the_existing_ones_by_id(store: Store) -> None:
    rooms = [
        Room(id=f"r{i}", agent_id=AGENT, platform="discord", platform_id=str(i), kind=kind)
        for i, kind in enumerate((RoomKind.DM, RoomKind.GROUP, RoomKind.THREAD))
    ]
    for room in rooms:
        await store.upsert_room(room)
    found = await store.get_rooms(["r2", "missing", "r0", "r2"])
    assert found == {"r2": rooms[2], "r0": rooms[0]}
    assert await store.get_rooms([]) == {}


async def test_store_entity_upsert_merges_names_in_order(store: Store) -> None:
    base: dict[str, Any] = {
        "id": "e1",
        "agent_id": AGENT,
        "platform": "discord",
        "platform_id": "42",
    }
    await store.upsert_entity(Entity(**base, names=["ada", "Ada L."], metadata={"a": 1}))
    await store.upsert_entity(Entity(**base, names=["Countess", "ada", "Countess"], is_bot=True))

    got = await store.get_entity("e1")
    assert got is not None
    assert got.names == ["ada", "Ada L.", "Countess"]
    assert got.is_bot is True
    assert await store.get_entity("missing") is None


async def test_store_participants_are_recorded_once(store: Store) -> None:
    await store.add_participant("r1", "e1")
    await store.add_participant("r1", "e2")
    await store.add_participant("r1", "e1")
    await store.add_participant("r2", "e1")

    assert sorted(await store.list_participants("r1")) == ["e1", "e2"]
    assert await store.list_participants("r2") == ["e1"]
    assert await store.list_participants("nobody") == []


async def test_store_delete_entity_removes_record_and_memberships_only(store: Store) -> None:
    for who in ("e1", "e2"):
        await store.upsert_entity(
            Entity(id=who, agent_id=AGENT, platform="discord", platform_id=who, names=[who])
        )
        await store.add_participant("r1", who)
    await store.add_participant("r2", "e1")
    kept = await store.add_memory(
        Memory(agent_id=AGENT, room_id="r1", entity_id="e1", content=Content(text="mine"))
    )

    assert await store.delete_entity("e1") is True
    assert await store.get_entity("e1") is None
    assert await store.list_participants("r1") == ["e2"]
    assert await store.list_participants("r2") == []
    assert await store.get_entity("e2") is not None
    assert await store.get_memory(kept.id) is not None  # memories go through delete_memories
    assert await store.delete_entity("e1") is False


async def test_store_find_entities_by_platform_id_and_name(store: Store) -> None:
    def person(id: str, platform: str, platform_id: str, *names: str, agent: str = AGENT) -> Entity:
        return Entity(
            id=id, agent_id=agent, platform=platform, platform_id=platform_id, names=list(names)
        )

    people = [
        person("e3", "discord", "111", "Ana", "ana_b"),
        person("e1", "instagram", "111", "alice.w"),
        person("e2", "discord", "222", "ALICE", "Straße"),
        person("e4", "discord", "111", "Ana", agent=OTHER_AGENT),
    ]
    for entity in people:
        await store.upsert_entity(entity)

    def ids(found: list[Entity]) -> list[str]:
        return [e.id for e in found]

    assert ids(await store.find_entities(agent_id=AGENT)) == ["e1", "e2", "e3"]  # by id
    assert await store.find_entities(agent_id=AGENT, platform_id="111") == [people[1], people[0]]
    assert ids(await store.find_entities(agent_id=AGENT, platform="discord")) == ["e2", "e3"]
    found = await store.find_entities(agent_id=AGENT, platform="discord", platform_id="111")
    assert ids(found) == ["e3"]
    # Any of the names, display name or username, ignoring case the Unicode way.
    assert ids(await store.find_entities(agent_id=AGENT, name="ANA_B")) == ["e3"]
    assert ids(await store.find_entities(agent_id=AGENT, name="alice")) == ["e2"]
    assert ids(await store.find_entities(agent_id=AGENT, name="STRASSE")) == ["e2"]
    assert await store.find_entities(agent_id=AGENT, name="ali") == []  # exact, not a prefix
    assert await store.find_entities(agent_id=AGENT, name="Ana", platform="instagram") == []
    assert ids(await store.find_entities(agent_id=OTHER_AGENT, name="ana")) == ["e4"]
    assert await store.find_entities(agent_id="nobody") == []


async def test_store_room_state_set_change_and_clear(store: Store) -> None:
    assert await store.get_room_state(AGENT, "r1") is None
    await store.set_room_state(AGENT, "r1", RoomState.FOLLOWED)
    await store.set_room_state(AGENT, "r1", RoomState.MUTED)
    assert await store.get_room_state(AGENT, "r1") is RoomState.MUTED
    assert await store.get_room_state(OTHER_AGENT, "r1") is None

    await store.set_room_state(AGENT, "r1", None)
    assert await store.get_room_state(AGENT, "r1") is None
    await store.set_room_state(AGENT, "r1", None)  # clearing twice is fine


# -- memories ----------------------------------------------------------------------------------


async def test_store_add_memory_round_trips_every_field(store: Store) -> None:
    memory = Memory(
        agent_id=AGENT,
        room_id="r1",
        entity_id="e1",
        kind=MemoryKind.FACT,
        content=Content.model_validate(
            {
                "text": "Ada likes tea ☕",
                "thought": "noted",
                "actions": ["REPLY"],
                "source": "discord",
                "attachments": [Attachment(url="https://example.invalid/a.png", title="a")],
                "in_reply_to": "m0",
                "metadata": {"nested": {"n": [1, 2]}},
                "plugin_key": "extra content keys are kept",
            }
        ),
        embedding=[0.6, 0.8, 0.0],
        embedding_model=MODEL,
        status=MemoryStatus.FAILED,
        error="boom",
        created_at=T0,
        updated_at=at(1),
    )
    stored = await store.add_memory(memory)
    got = await store.get_memory(memory.id)

    for result in (stored, got):
        assert result is not None
        assert result.model_dump(exclude={"embedding"}) == memory.model_dump(exclude={"embedding"})
        assert result.embedding == pytest.approx(memory.embedding, abs=1e-6)
        assert result.created_at == T0  # exact to the microsecond
        assert result.created_at.utcoffset() == timedelta(0)
    assert await store.get_memory("missing") is None


async def test_store_add_memory_without_embedding(store: Store) -> None:
    memory = await store.add_memory(make_memory())
    assert memory.embedding is None
    assert memory.embedding_model is None


async def test_store_add_memory_is_idempotent_on_id(store: Store) -> None:
    first = make_memory("first")
    await store.add_memory(first)
    again = await store.add_memory(first.model_copy(update={"content": Content(text="second")}))

    assert again.content.text == "first"
    assert await store.count_memories(agent_id=AGENT) == 1


async def test_store_update_memory_replaces_mutable_fields(store: Store) -> None:
    memory = await store.add_memory(make_memory("draft", status=MemoryStatus.RECEIVED))
    changed = memory.model_copy(
        update={
            "content": Content(text="final", actions=["REPLY"]),
            "embedding": [0.0, 1.0, 0.0],
            "embedding_model": MODEL,
            "status": MemoryStatus.PROCESSED,
            "error": None,
        }
    )
    await store.update_memory(changed)

    got = await store.get_memory(memory.id)
    assert got is not None
    assert got.content == changed.content
    assert got.embedding == pytest.approx([0.0, 1.0, 0.0])
    assert (got.embedding_model, got.status) == (MODEL, MemoryStatus.PROCESSED)
    assert got.created_at == memory.created_at
    assert got.updated_at > memory.updated_at


async def test_store_reads_memories_without_vectors_and_keeps_them_on_update(
    store: Store,
) -> None:
    """``get_memories(embeddings=False)`` leaves vectors unread; updating such a memory keeps its
    stored vector (searches still find it), and only setting both fields to None drops it."""
    kept = await store.add_memory(make_memory("kept", embedding=[1.0, 0.0, 0.0], seconds=1))
    await store.add_memory(make_memory("bare", seconds=0))

    async def search(vector: list[float]) -> list[str]:
        hits = await store.search_memories(
            agent_id=AGENT, embedding=vector, embedding_model=MODEL, k=5, min_score=0.5
        )
        return [h.memory.id for h in hits]

    assert await search([1.0, 0.0, 0.0]) == [kept.id]  # the first search may load an index
    light = await store.get_memories(agent_id=AGENT, embeddings=False)
    assert texts(light) == ["kept", "bare"]
    assert [(m.embedding, m.embedding_model) for m in light] == [(None, MODEL), (None, None)]
    assert [m.vector_unread for m in light] == [True, False]
    assert light[0].content == kept.content and light[0].created_at == kept.created_at
    (hit,) = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, k=1, embeddings=False
    )
    assert (hit.memory.id, hit.memory.embedding, hit.memory.embedding_model) == (
        kept.id,
        None,
        MODEL,
    )
    assert hit.score == pytest.approx(1.0)

    await store.update_memory(
        light[0].model_copy(
            update={"content": Content(text="edited"), "status": MemoryStatus.PROCESSED}
        )
    )
    got = await store.get_memory(kept.id)
    assert got is not None
    assert (got.content.text, got.status) == ("edited", MemoryStatus.PROCESSED)
    assert got.embedding == pytest.approx([1.0, 0.0, 0.0])
    assert got.embedding_model == MODEL
    assert await search([1.0, 0.0, 0.0]) == [kept.id]

    await store.update_memory(got.model_copy(update={"embedding": None, "embedding_model": None}))
    got = await store.get_memory(kept.id)
    assert got is not None and (got.embedding, got.embedding_model) == (None, None)
    assert await search([1.0, 0.0, 0.0]) == []


async def test_store_update_of_a_missing_memory_creates_nothing(store: Store) -> None:
    await store.update_memory(make_memory())
    await store.set_memory_status("missing", MemoryStatus.FAILED)
    assert await store.count_memories(agent_id=AGENT) == 0


async def test_store_set_memory_status_sets_and_clears_error(store: Store) -> None:
    memory = await store.add_memory(make_memory(status=MemoryStatus.RECEIVED))

    await store.set_memory_status(memory.id, MemoryStatus.FAILED, error="model timed out")
    got = await store.get_memory(memory.id)
    assert got is not None
    assert (got.status, got.error) == (MemoryStatus.FAILED, "model timed out")
    assert got.updated_at > memory.updated_at

    await store.set_memory_status(memory.id, MemoryStatus.PROCESSED)
    got = await store.get_memory(memory.id)
    assert got is not None
    assert (got.status, got.error) == (MemoryStatus.PROCESSED, None)


async def test_store_get_memories_newest_first_with_limit(store: Store) -> None:
    for i in (2, 0, 4, 1, 3):  # inserted out of order
        await store.add_memory(make_memory(f"m{i}", seconds=i))

    assert texts(await store.get_memories(agent_id=AGENT)) == ["m4", "m3", "m2", "m1", "m0"]
    assert texts(await store.get_memories(agent_id=AGENT, limit=2)) == ["m4", "m3"]
    assert await store.get_memories(agent_id=AGENT, limit=0) == []


async def test_store_get_memories_before_is_exclusive_to_the_microsecond(store: Store) -> None:
    for i in range(4):
        await store.add_memory(make_memory(f"m{i}", seconds=i))
    await store.add_memory(make_memory("m2+1us", seconds=2.000001))

    page = await store.get_memories(agent_id=AGENT, before=at(2))
    assert texts(page) == ["m1", "m0"]
    assert texts(await store.get_memories(agent_id=AGENT, before=at(2.000001))) == [
        "m2",
        "m1",
        "m0",
    ]
    # Paging with the oldest item of the last page as the cursor.
    first = await store.get_memories(agent_id=AGENT, limit=2)
    second = await store.get_memories(agent_id=AGENT, limit=2, before=first[-1].created_at)
    assert texts(first) + texts(second) == ["m3", "m2+1us", "m2", "m1"]


async def test_store_get_memories_reusing_reads_what_changed(store: Store) -> None:
    """``get_memories_reusing`` returns what ``get_memories(embeddings=False)`` does: new,
    changed and deleted memories show as they are now, whatever ``known`` holds."""
    for i in range(5):
        await store.add_memory(
            make_memory(f"m{i}", seconds=i, embedding=[1.0, float(i)], room_id="r1")
        )
    await store.add_memory(make_memory("elsewhere", seconds=9, room_id="r2"))
    await store.add_memory(make_memory("a fact", seconds=8, room_id="r1", kind=MemoryKind.FACT))

    async def read(known: dict[str, Memory]) -> list[Memory]:
        return await store.get_memories_reusing(
            agent_id=AGENT, room_id="r1", kinds=[MemoryKind.MESSAGE], limit=3, known=known
        )

    first = await read({})
    assert first == await store.get_memories(
        agent_id=AGENT, room_id="r1", kinds=[MemoryKind.MESSAGE], limit=3, embeddings=False
    )
    assert texts(first) == ["m4", "m3", "m2"] and all(m.embedding is None for m in first)
    known = {m.id: m for m in first}
    m4, m3, m2 = first
    await store.set_memory_status(m3.id, MemoryStatus.PROCESSED)
    edited = m2.model_copy(deep=True)
    edited.content.text = "m2, edited"
    await store.update_memory(edited)
    await store.add_memory(make_memory("m5", seconds=5, room_id="r1"))
    again = await read(known)
    assert texts(again) == ["m5", "m4", "m3"]
    assert again == await store.get_memories(
        agent_id=AGENT, room_id="r1", kinds=[MemoryKind.MESSAGE], limit=3, embeddings=False
    )
    assert again[2].status is MemoryStatus.PROCESSED and m3.status is MemoryStatus.STORED
    await store.delete_memory(m4.id)
    assert texts(await read({m.id: m for m in again})) == ["m5", "m3", "m2, edited"]


async def test_store_get_memories_finds_what_was_added_after_finding_nothing(
    store: Store,
) -> None:
    """A read of facts (or summaries) that found nothing finds one added afterwards, with or
    without a vector, whatever a store keeps between reads."""

    async def facts() -> list[str]:
        return texts(
            await store.get_memories(agent_id=AGENT, entity_id="user-1", kinds=[MemoryKind.FACT])
        )

    assert await facts() == [] and await facts() == []
    await store.add_memory(make_memory("likes tea", kind=MemoryKind.FACT, seconds=1))
    assert await facts() == ["likes tea"]
    assert await facts() == ["likes tea"]
    await store.add_memory(
        make_memory("plays chess", kind=MemoryKind.FACT, seconds=2, embedding=[1.0, 0.0])
    )
    assert await facts() == ["plays chess", "likes tea"]
    summaries = {"agent_id": AGENT, "room_id": "room-1", "kinds": [MemoryKind.SUMMARY]}
    assert await store.get_memories(**summaries) == []
    await store.add_memory(make_memory("they met", kind=MemoryKind.SUMMARY, seconds=3))
    assert texts(await store.get_memories(**summaries)) == ["they met"]


async def test_store_get_memories_filters(store: Store) -> None:
    await store.add_memory(make_memory("a", seconds=1, room_id="r1", entity_id="e1"))
    await store.add_memory(make_memory("b", seconds=2, room_id="r1", entity_id="e2"))
    await store.add_memory(
        make_memory("c", seconds=3, room_id="r2", entity_id="e1", kind=MemoryKind.FACT)
    )
    await store.add_memory(
        make_memory("d", seconds=4, room_id="r2", entity_id="e2", status=MemoryStatus.RECEIVED)
    )
    await store.add_memory(make_memory("other agent", seconds=5, agent_id=OTHER_AGENT))

    assert texts(await store.get_memories(agent_id=AGENT)) == ["d", "c", "b", "a"]
    assert texts(await store.get_memories(agent_id=AGENT, room_id="r1")) == ["b", "a"]
    assert texts(await store.get_memories(agent_id=AGENT, entity_id="e1")) == ["c", "a"]
    assert texts(await store.get_memories(agent_id=AGENT, kinds=[MemoryKind.FACT])) == ["c"]
    assert texts(
        await store.get_memories(agent_id=AGENT, kinds=[MemoryKind.MESSAGE, MemoryKind.FACT])
    ) == ["d", "c", "b", "a"]
    assert texts(await store.get_memories(agent_id=AGENT, statuses=[MemoryStatus.RECEIVED])) == [
        "d"
    ]
    assert texts(
        await store.get_memories(agent_id=AGENT, room_id="r2", entity_id="e1", kinds=["fact"])  # type: ignore[list-item]
    ) == ["c"]
    assert await store.get_memories(agent_id=AGENT, kinds=[]) == []
    assert texts(await store.get_memories(agent_id=OTHER_AGENT)) == ["other agent"]


async def test_store_count_memories(store: Store) -> None:
    await store.add_memory(make_memory(room_id="r1"))
    await store.add_memory(make_memory(room_id="r1", kind=MemoryKind.FACT))
    await store.add_memory(make_memory(room_id="r2"))
    await store.add_memory(make_memory(agent_id=OTHER_AGENT))

    assert await store.count_memories(agent_id=AGENT) == 3
    assert await store.count_memories(agent_id=AGENT, room_id="r1") == 2
    assert await store.count_memories(agent_id=AGENT, kinds=[MemoryKind.FACT]) == 1
    assert await store.count_memories(agent_id=AGENT, room_id="r2", kinds=[MemoryKind.FACT]) == 0
    assert await store.count_memories(agent_id="nobody") == 0


async def test_store_count_memories_of_an_entity(store: Store) -> None:
    await store.add_memory(make_memory(room_id="r1", entity_id="e1"))
    await store.add_memory(make_memory(room_id="r2", entity_id="e1", kind=MemoryKind.FACT))
    await store.add_memory(make_memory(room_id="r1", entity_id="e2"))
    await store.add_memory(make_memory(agent_id=OTHER_AGENT, entity_id="e1"))

    assert await store.count_memories(agent_id=AGENT, entity_id="e1") == 2
    assert await store.count_memories(agent_id=AGENT, entity_id="e1", room_id="r1") == 1
    kinds = [MemoryKind.MESSAGE]
    assert await store.count_memories(agent_id=AGENT, entity_id="e1", kinds=kinds) == 1
    assert await store.count_memories(agent_id=AGENT, entity_id="nobody") == 0


async def test_store_count_memories_since(store: Store) -> None:
    for second in (0, 10, 10, 20):
        await store.add_memory(make_memory(room_id="r1", seconds=second))
    start = make_memory(seconds=10).created_at
    assert await store.count_memories(agent_id=AGENT, room_id="r1", since=start) == 3  # inclusive
    later = make_memory(seconds=20.5).created_at
    assert await store.count_memories(agent_id=AGENT, room_id="r1", since=later) == 0


async def test_store_delete_memory(store: Store) -> None:
    memory = await store.add_memory(make_memory())
    assert await store.delete_memory(memory.id) is True
    assert await store.get_memory(memory.id) is None
    assert await store.delete_memory(memory.id) is False


async def test_store_delete_memories_by_filter(store: Store) -> None:
    await store.add_memory(make_memory("a", room_id="r1", entity_id="e1"))
    await store.add_memory(make_memory("b", room_id="r1", entity_id="e2", kind=MemoryKind.FACT))
    await store.add_memory(make_memory("c", room_id="r2", entity_id="e1"))
    await store.add_memory(make_memory("d", room_id="r1", agent_id=OTHER_AGENT))

    assert await store.delete_memories(agent_id=AGENT, room_id="r1", kinds=[MemoryKind.FACT]) == 1
    assert await store.delete_memories(agent_id=AGENT, entity_id="e1") == 2
    assert texts(await store.get_memories(agent_id=AGENT)) == []
    assert await store.delete_memories(agent_id=AGENT) == 0
    assert await store.count_memories(agent_id=OTHER_AGENT) == 1


async def test_store_delete_memories_before_a_time(store: Store) -> None:
    """``before`` is exclusive to the microsecond and combines with the other filters; what is
    deleted is gone from searches too (the retention job relies on both)."""
    for i, kind in enumerate([MemoryKind.MESSAGE, MemoryKind.MESSAGE, MemoryKind.FACT]):
        await store.add_memory(
            make_memory(f"old{i}", seconds=i, kind=kind, embedding=[1.0, 0.1 * i, 0.0])
        )
    await store.add_memory(make_memory("new", seconds=10, embedding=[1.0, 0.0, 0.0]))
    await store.add_memory(make_memory("other agent", seconds=0, agent_id=OTHER_AGENT))
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, k=10
    )
    assert len(hits) == 4  # the index (if any) holds them all before the delete

    deleted = await store.delete_memories(
        agent_id=AGENT, kinds=[MemoryKind.MESSAGE], before=make_memory(seconds=1).created_at
    )
    assert deleted == 1
    assert texts(await store.get_memories(agent_id=AGENT)) == ["new", "old2", "old1"]
    assert await store.delete_memories(agent_id=AGENT, before=at(1.000001)) == 1  # old1 only
    assert texts(await store.get_memories(agent_id=AGENT)) == ["new", "old2"]
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, k=10
    )
    assert sorted(h.memory.content.text for h in hits) == ["new", "old2"]
    assert await store.count_memories(agent_id=OTHER_AGENT) == 1


# -- search ------------------------------------------------------------------------------------


async def test_store_search_returns_top_k_best_first(store: Store) -> None:
    vectors = {
        "x": [1.0, 0.0, 0.0],
        "xy": [0.8, 0.6, 0.0],
        "y": [0.0, 1.0, 0.0],
        "-x": [-1.0, 0, 0],
    }
    for text, vector in vectors.items():
        await store.add_memory(make_memory(text, embedding=vector))

    hits = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, k=3
    )
    assert [h.memory.content.text for h in hits] == ["x", "xy", "y"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.8, 0.0], abs=1e-6)
    assert hits[0].memory.embedding == pytest.approx([1.0, 0.0, 0.0])

    everything = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, k=10
    )
    assert [h.memory.content.text for h in everything] == ["x", "xy", "y", "-x"]
    assert everything[-1].score == pytest.approx(-1.0)
    as_array = await store.search_memories(  # an embedder's numpy row works as well
        agent_id=AGENT, embedding=np.array([1.0, 0.0, 0.0], dtype=np.float32), embedding_model=MODEL
    )
    assert [h.memory.content.text for h in as_array][:2] == ["x", "xy"]
    fused = await store.search_hybrid(
        agent_id=AGENT, text="y", embedding=np.array([1.0, 0.0, 0.0]), embedding_model=MODEL
    )
    assert fused and fused[0].memory.content.text in {"x", "y"}


async def test_store_search_scores_cosine_for_unnormalized_vectors(store: Store) -> None:
    await store.add_memory(make_memory("long", embedding=[10.0, 0.0, 0.0]))
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[0.5, 0.5, 0.0], embedding_model=MODEL
    )
    assert hits[0].score == pytest.approx(0.5**0.5, abs=1e-6)


async def test_store_search_applies_filters(store: Store) -> None:
    v = [1.0, 0.0, 0.0]
    await store.add_memory(make_memory("r1e1", room_id="r1", entity_id="e1", embedding=v))
    await store.add_memory(make_memory("r2e1", room_id="r2", entity_id="e1", embedding=v))
    await store.add_memory(
        make_memory("r1e2", room_id="r1", entity_id="e2", embedding=v, kind=MemoryKind.FACT)
    )
    await store.add_memory(make_memory("other", agent_id=OTHER_AGENT, embedding=v))
    await store.add_memory(make_memory("no vector", room_id="r1"))

    async def found(**filters: Any) -> list[str]:
        hits = await store.search_memories(
            agent_id=AGENT, embedding=v, embedding_model=MODEL, **filters
        )
        return sorted(h.memory.content.text for h in hits)

    assert await found() == ["r1e1", "r1e2", "r2e1"]
    assert await found(room_id="r1") == ["r1e1", "r1e2"]
    assert await found(entity_id="e1") == ["r1e1", "r2e1"]
    assert await found(kinds=[MemoryKind.FACT]) == ["r1e2"]
    assert await found(room_id="r1", kinds=[MemoryKind.MESSAGE]) == ["r1e1"]
    assert await found(k=0) == []


async def test_store_search_never_mixes_embedding_models(store: Store) -> None:
    await store.add_memory(make_memory("mine", embedding=[1.0, 0.0, 0.0]))
    await store.add_memory(
        make_memory("same dim, other model", embedding=[1.0, 0.0, 0.0], embedding_model="other:3")
    )
    await store.add_memory(
        make_memory("other dim", embedding=[1.0, 0.0, 0.0, 0.0], embedding_model="other:4")
    )

    hits = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL
    )
    assert [h.memory.content.text for h in hits] == ["mine"]
    none = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model="never-used:3"
    )
    assert none == []


async def test_store_search_min_score_and_exclude_ids(store: Store) -> None:
    close = await store.add_memory(make_memory("close", embedding=[1.0, 0.0, 0.0]))
    await store.add_memory(make_memory("near", embedding=[0.8, 0.6, 0.0]))
    await store.add_memory(make_memory("far", embedding=[0.0, 1.0, 0.0]))

    async def found(**options: Any) -> list[str]:
        hits = await store.search_memories(
            agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, **options
        )
        return [h.memory.content.text for h in hits]

    assert await found(min_score=0.5) == ["close", "near"]
    assert await found(min_score=0.99) == ["close"]
    assert await found(exclude_ids=[close.id]) == ["near", "far"]
    assert await found(exclude_ids=[close.id], min_score=0.5, k=1) == ["near"]
    assert await found(exclude_ids=[f"id-{i}" for i in range(5000)]) == ["close", "near", "far"]


async def test_store_search_ranks_embedded_text(store: Store, fake_embedder: HashEmbedder) -> None:
    notes = ["my password reset failed", "the weather is nice today", "I love green tea"]
    vectors = await fake_embedder.embed(notes)
    for i, (note, vector) in enumerate(zip(notes, vectors, strict=True)):
        await store.add_memory(
            make_memory(
                note, seconds=i, embedding=vector.tolist(), embedding_model=fake_embedder.model_id
            )
        )

    query = await fake_embedder.embed_one("how do I reset my password")
    hits = await store.search_memories(
        agent_id=AGENT, embedding=query.tolist(), embedding_model=fake_embedder.model_id, k=1
    )
    assert [h.memory.content.text for h in hits] == ["my password reset failed"]


async def test_store_search_time_window(store: Store) -> None:
    v = [1.0, 0.0, 0.0]
    for i in range(5):
        await store.add_memory(make_memory(f"m{i}", seconds=i, embedding=v))

    async def found(**window: Any) -> list[str]:
        hits = await store.search_memories(
            agent_id=AGENT, embedding=v, embedding_model=MODEL, **window
        )
        return sorted(h.memory.content.text for h in hits)

    assert await found(since=at(1), before=at(3)) == ["m1", "m2"]  # since inclusive, before not
    assert await found(since=at(3)) == ["m3", "m4"]
    assert await found(before=at(1)) == ["m0"]
    assert await found(since=at(10)) == []


async def test_store_search_follows_updates_and_deletes(store: Store) -> None:
    """Searches see every write at once (an in-memory index must be kept in step)."""
    a = await store.add_memory(make_memory("a", embedding=[1.0, 0.0, 0.0]))
    b = await store.add_memory(make_memory("b", embedding=[0.0, 1.0, 0.0], room_id="r2"))
    c = await store.add_memory(make_memory("c", embedding=[0.0, 0.0, 1.0], kind=MemoryKind.FACT))

    async def found(vector: list[float], **options: Any) -> list[str]:
        hits = await store.search_memories(
            agent_id=AGENT, embedding=vector, embedding_model=MODEL, k=1, **options
        )
        return [h.memory.content.text for h in hits]

    assert await found([1.0, 0.0, 0.0]) == ["a"]  # the first search may load an index
    await store.update_memory(a.model_copy(update={"embedding": [0.0, -1.0, 0.0]}))
    assert await found([1.0, 0.0, 0.0], min_score=0.5) == []
    assert await found([0.0, -1.0, 0.0]) == ["a"]
    await store.update_memory(a.model_copy(update={"embedding": None, "embedding_model": None}))
    assert await found([0.0, -1.0, 0.0], min_score=0.5) == []
    await store.update_memory(b.model_copy(update={"embedding_model": "other:3"}))
    assert await found([0.0, 1.0, 0.0], min_score=0.5) == []
    assert await store.delete_memory(c.id)
    assert await found([0.0, 0.0, 1.0], min_score=0.5) == []
    d = await store.add_memory(make_memory("d", embedding=[0.0, 0.0, 1.0], room_id="r2"))
    assert await found([0.0, 0.0, 1.0]) == ["d"]
    assert await store.delete_memories(agent_id=AGENT, room_id="r2") == 2
    assert await found([0.0, 0.0, 1.0], min_score=0.5) == []
    await store.add_memory(make_memory("e", embedding=[0.0, 0.0, 1.0]))
    assert await store.delete_agent(AGENT) is False  # no agent record, but its memories go
    assert await found([0.0, 0.0, 1.0], min_score=0.5) == []
    assert d.id  # (kept for readability)


async def test_store_search_merges_kinds_each_memory_once(store: Store) -> None:
    """An index may keep knowledge apart from conversation: a search over several kinds still
    ranks them together, each memory once, and follows deletions in either part."""
    kinds = [MemoryKind.KNOWLEDGE, MemoryKind.MESSAGE, MemoryKind.FACT, MemoryKind.KNOWLEDGE]
    added = []
    for i, kind in enumerate(kinds):
        vector = [1.0, 0.2 * i, 0.0]
        added.append(await store.add_memory(make_memory(f"n{i}", embedding=vector, kind=kind)))

    async def found(k: int = 10, **options: Any) -> list[str]:
        hits = await store.search_memories(
            agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, k=k, **options
        )
        return [h.memory.content.text for h in hits]

    assert await found() == ["n0", "n1", "n2", "n3"]
    assert await found(kinds=[MemoryKind.FACT, MemoryKind.KNOWLEDGE]) == ["n0", "n2", "n3"]
    assert await found(kinds=[MemoryKind.KNOWLEDGE], k=1) == ["n0"]
    assert await store.delete_memory(added[0].id)
    assert await found() == ["n1", "n2", "n3"]
    assert await found(kinds=[MemoryKind.KNOWLEDGE]) == ["n3"]


async def test_store_prepare_search_then_search(store: Store) -> None:
    await store.add_memory(make_memory("x", embedding=[1.0, 0.0, 0.0]))
    await store.prepare_search(agent_id=AGENT, embedding_model=MODEL, dim=3)
    await store.add_memory(make_memory("y", embedding=[0.9, 0.1, 0.0]))
    hits = await store.search_memories(
        agent_id=AGENT, embedding=[1.0, 0.0, 0.0], embedding_model=MODEL
    )
    assert [h.memory.content.text for h in hits] == ["x", "y"]


# -- hybrid search -----------------------------------------------------------------------------


async def _add_notes(store: Store, embedder: HashEmbedder, notes: list[str], **fields: Any) -> None:
    vectors = await embedder.embed(notes)
    for i, (note, vector) in enumerate(zip(notes, vectors, strict=True)):
        await store.add_memory(
            make_memory(
                note,
                seconds=i,
                embedding=vector.tolist(),
                embedding_model=embedder.model_id,
                **fields,
            )
        )


async def test_store_hybrid_ranks_a_rare_keyword_match_high(store: Store) -> None:
    """A memory that shares only a rare word with the query ranks near the top, though its
    vector is far from the query's (here: the opposite of it)."""
    embedder = HashEmbedder(dim=64)
    filler = [f"we talked about the weather and lunch plans number {i}" for i in range(30)]
    await _add_notes(store, embedder, filler)
    query = "what was the name of the zanzibar ferry"
    query_vector = await embedder.embed_one(query)
    needle = make_memory(
        "Zanzibar is where the ferry stops on Tuesdays",
        embedding=(-query_vector).tolist(),  # the vectors disagree completely
        embedding_model=embedder.model_id,
    )
    await store.add_memory(needle)

    by_vector = await store.search_memories(
        agent_id=AGENT, embedding=query_vector.tolist(), embedding_model=embedder.model_id, k=5
    )
    assert needle.id not in [h.memory.id for h in by_vector]
    hybrid = await store.search_hybrid(
        agent_id=AGENT,
        text=query,
        embedding=query_vector.tolist(),
        embedding_model=embedder.model_id,
        k=5,
    )
    ids = [h.memory.id for h in hybrid]
    assert needle.id in ids[:2]
    assert len(hybrid) == 5
    assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)
    assert all(0 < h.score <= 2 / 61 for h in hybrid)  # reciprocal rank fusion, k = 60


async def test_store_search_hits_carry_the_cosine_the_search_measured(store: Store) -> None:
    """``similarity`` is the cosine of every hit of a search by vector, and of the hybrid hits
    its vector side found; a hit only the text side found has none. Callers that judge hits by
    it need not read the vectors (``embeddings=False``)."""
    embedder = HashEmbedder(dim=64)
    query = "when does the zanzibar ferry leave"
    query_vector = (await embedder.embed_one(query)).tolist()
    # More close notes than the vector side's candidates (50 for k=5): the needle, opposite
    # to the query, is found by its word alone.
    for i in range(60):
        await store.add_memory(
            make_memory(
                f"note {i} on lunch", embedding=query_vector, embedding_model=embedder.model_id
            )
        )
    needle = make_memory(
        "The Zanzibar boat is late",
        embedding=[-x for x in query_vector],
        embedding_model=embedder.model_id,
    )
    await store.add_memory(needle)

    by_vector = await store.search_memories(
        agent_id=AGENT, embedding=query_vector, embedding_model=embedder.model_id, k=3
    )
    assert [h.similarity for h in by_vector] == [h.score for h in by_vector]
    hybrid = await store.search_hybrid(
        agent_id=AGENT,
        text=query,
        embedding=query_vector,
        embedding_model=embedder.model_id,
        k=5,
        embeddings=False,
    )
    by_id = {h.memory.id: h for h in hybrid}
    assert needle.id in by_id and by_id[needle.id].similarity is None
    others = [h for h in hybrid if h.memory.id != needle.id]
    assert others and all(h.similarity == pytest.approx(1.0, abs=1e-5) for h in others)
    assert all(h.memory.embedding is None for h in hybrid)
    with_vectors = await store.search_hybrid(
        agent_id=AGENT, text=query, embedding=query_vector, embedding_model=embedder.model_id, k=5
    )
    assert all(h.memory.embedding is not None for h in with_vectors)


@pytest.mark.parametrize("kind", [MemoryKind.KNOWLEDGE, MemoryKind.MESSAGE])
async def test_store_hybrid_min_similarity_keeps_the_hits_worth_showing(
    store: Store, kind: MemoryKind
) -> None:
    """With ``min_similarity``, a hybrid search returns only the hits whose vector is that close
    or whose text holds a word of the query: a far hit that shares no word is left out, also
    when no memory holds any of the query's words (a store may then skip reading it)."""
    embedder = HashEmbedder(dim=64)
    query_vector = (await embedder.embed_one("when does the ferry leave")).tolist()
    far = [-x for x in query_vector]

    def fragment(text: str, vector: list[float]) -> Memory:
        return make_memory(text, kind=kind, embedding=vector, embedding_model=embedder.model_id)

    close = await store.add_memory(fragment("Harbor opens at dawn", query_vector))
    shares = await store.add_memory(fragment("The Zanzibar boat is late", far))
    await store.add_memory(fragment("Lunch is served at noon", far))

    async def found(text: str, min_similarity: float | None) -> set[str]:
        hits = await store.search_hybrid(
            agent_id=AGENT,
            text=text,
            embedding=query_vector,
            embedding_model=embedder.model_id,
            k=5,
            kinds=[kind],
            embeddings=False,
            min_similarity=min_similarity,
        )
        return {h.memory.id for h in hits}

    assert len(await found("when does zanzibar leave", None)) == 3
    assert await found("when does zanzibar leave", 0.3) == {close.id, shares.id}
    assert await found("quokka photos", 0.3) == {close.id}  # no memory holds either word
    assert await found("quokka photos", 1.5) == set()
    assert await found("", 0.3) == {close.id}


async def test_store_hybrid_applies_filters_and_models(store: Store) -> None:
    embedder = HashEmbedder(dim=64)
    await _add_notes(store, embedder, ["the quokka photo from room one"], room_id="r1")
    await _add_notes(store, embedder, ["the quokka photo from room two"], room_id="r2")
    await _add_notes(store, embedder, ["a quokka fact"], room_id="r2", kind=MemoryKind.FACT)
    await _add_notes(store, embedder, ["quokka of another agent"], agent_id=OTHER_AGENT)
    query = "quokka"
    vector = (await embedder.embed_one(query)).tolist()

    async def found(**filters: Any) -> list[str]:
        hits = await store.search_hybrid(
            agent_id=AGENT,
            text=query,
            embedding=vector,
            embedding_model=embedder.model_id,
            **filters,
        )
        return sorted(h.memory.content.text for h in hits)

    everything = [
        "a quokka fact",
        "the quokka photo from room one",
        "the quokka photo from room two",
    ]
    assert await found() == everything
    assert await found(room_id="r1") == ["the quokka photo from room one"]
    assert await found(kinds=[MemoryKind.FACT]) == ["a quokka fact"]
    assert await found(room_id="r2", kinds=[MemoryKind.MESSAGE]) == [
        "the quokka photo from room two"
    ]
    assert await found(kinds=[]) == []
    assert await found(k=0) == []
    assert await found(since=at(10)) == []
    # Text alone still finds memories whose vectors are of another model.
    other_model = await store.search_hybrid(
        agent_id=AGENT, text=query, embedding=[1.0, 0.0, 0.0], embedding_model="other:3"
    )
    assert len(other_model) == 3


async def test_store_hybrid_follows_text_changes(store: Store) -> None:
    embedder = HashEmbedder(dim=64)
    await _add_notes(store, embedder, ["the aardvark is asleep"])
    [memory] = await store.get_memories(agent_id=AGENT)
    vector = (await embedder.embed_one("ocelot")).tolist()

    async def found(word: str) -> list[str]:
        hits = await store.search_hybrid(
            agent_id=AGENT, text=word, embedding=vector, embedding_model="unused:64", k=3
        )
        return [h.memory.content.text for h in hits]

    assert await found("aardvark") == ["the aardvark is asleep"]
    await store.update_memory(memory.model_copy(update={"content": Content(text="an ocelot")}))
    assert await found("aardvark") == []
    assert await found("ocelot") == ["an ocelot"]
    await store.delete_memory(memory.id)
    assert await found("ocelot") == []
    assert await found("") == []


# -- re-embedding ------------------------------------------------------------------------------


async def test_store_stale_embeddings_lists_other_models_oldest_first(store: Store) -> None:
    await store.add_memory(
        make_memory("new", seconds=2, embedding=[1.0, 0, 0], embedding_model="m:3")
    )
    await store.add_memory(make_memory("old1", seconds=0, embedding=[1.0, 0, 0]))
    await store.add_memory(make_memory("old2", seconds=1, embedding=[1.0, 0, 0]))
    await store.add_memory(make_memory("none", seconds=3))
    await store.add_memory(make_memory("other", agent_id=OTHER_AGENT, embedding=[1.0, 0, 0]))

    assert await store.count_stale_embeddings(embedding_model="m:3") == 3
    assert await store.count_stale_embeddings(embedding_model="m:3", agent_id=AGENT) == 2
    stale = await store.stale_embeddings(embedding_model="m:3", agent_id=AGENT)
    assert texts(stale) == ["old1", "old2"]
    assert texts(await store.stale_embeddings(embedding_model="m:3", limit=1)) == ["old1"]


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [{"a": [1, 2.5, None, "x"]}, ["x"], "text", 42, True])
async def test_store_settings_round_trip(store: Store, value: Any) -> None:
    await store.set_setting("k", value)
    assert await store.get_setting("k") == value


async def test_store_settings_overwrite_and_missing(store: Store) -> None:
    assert await store.get_setting("k") is None
    await store.set_setting("k", {"v": 1})
    await store.set_setting("k", {"v": 2})
    assert await store.get_setting("k") == {"v": 2}


# -- lifecycle and schema ----------------------------------------------------------------------


async def test_store_data_survives_reopening(store_factory: StoreFactory) -> None:
    memory = make_memory("remember me", embedding=[0.0, 0.0, 1.0])
    async with store_factory.new_store() as store:
        await store.upsert_agent(AgentRecord(id=AGENT, name="Ada", character={}))
        await store.add_memory(memory)
        await store.set_setting("k", "v")

    async with store_factory.new_store() as reopened:
        assert await reopened.get_agent(AGENT) is not None
        assert await reopened.get_memory(memory.id) is not None
        assert await reopened.get_setting("k") == "v"
        hits = await reopened.search_memories(
            agent_id=AGENT, embedding=[0.0, 0.0, 1.0], embedding_model=MODEL
        )
        assert [h.memory.id for h in hits] == [memory.id]


async def test_store_records_its_schema_version(store_factory: StoreFactory) -> None:
    async with store_factory.new_store():
        pass
    assert store_factory.stored_schema_version() == store_factory.latest_schema_version
    async with store_factory.new_store():  # reopening applies nothing twice
        pass
    assert store_factory.stored_schema_version() == store_factory.latest_schema_version


async def test_store_refuses_a_database_from_a_newer_version(store_factory: StoreFactory) -> None:
    async with store_factory.new_store():
        pass
    store_factory.record_schema_version(store_factory.latest_schema_version + 1)

    with pytest.raises(StoreError, match="newer"):
        async with store_factory.new_store():
            pass


async def test_store_close_is_safe_twice(store_factory: StoreFactory) -> None:
    store = store_factory.new_store()
    await store.open()
    await store.close()
    await store.close()
