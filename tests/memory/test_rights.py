"""Data rights on every store: forget a person; export and import an agent's memories as JSON
Lines."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carrier.memory.base import Store
from carrier.memory.fake import HashEmbedder
from carrier.memory.rights import (
    LineError,
    export_memories,
    forget_entity,
    import_memories,
    iter_memories,
)
from carrier.memory.sqlite import SQLiteStore
from carrier.types import Attachment, Content, Entity, Memory, MemoryKind, MemoryStatus

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
AGENT, OTHER_AGENT = "agent-1", "agent-2"
ANA, BOB, ME = "ent-ana", "ent-bob", "ent-agent"
DM_ANA, DM_BOB, GENERAL = "room-dm-ana", "room-dm-bob", "room-general"
EMBEDDER = HashEmbedder(dim=8)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def add(
    store: Store,
    text: str,
    *,
    seconds: float,
    entity: str,
    room: str,
    kind: MemoryKind = MemoryKind.MESSAGE,
    agent: str = AGENT,
    reply_to: str | None = None,
    metadata: dict[str, object] | None = None,
    memory_id: str | None = None,
) -> Memory:
    vector = (await EMBEDDER.embed_one(text)).tolist()
    memory = Memory(
        agent_id=agent,
        room_id=room,
        entity_id=entity,
        kind=kind,
        content=Content(text=text, in_reply_to=reply_to, metadata=metadata or {}),
        embedding=vector,
        embedding_model=EMBEDDER.model_id,
        created_at=at(seconds),
        updated_at=at(seconds),
        **({"id": memory_id} if memory_id else {}),
    )
    return await store.add_memory(memory)


async def conversation(store: Store) -> dict[str, list[Memory]]:
    """Ana and Bob talk to the agent in their DMs and in #general; the other agent knows Ana too."""
    ana: list[Memory] = []
    keep: list[Memory] = []
    t = 0.0
    for room in (DM_ANA, GENERAL):
        for i in range(3):
            said = await add(store, f"ana {room} {i}", seconds=t, entity=ANA, room=room)
            reply = await add(
                store, f"re ana {i}", seconds=t + 1, entity=ME, room=room, reply_to=said.id
            )
            ana += [said, reply]
            t += 2
    for room in (DM_BOB, GENERAL):
        for i in range(2):
            said = await add(store, f"bob {room} {i}", seconds=t, entity=BOB, room=room)
            reply = await add(
                store, f"re bob {i}", seconds=t + 1, entity=ME, room=room, reply_to=said.id
            )
            keep += [said, reply]
            t += 2
    ana.append(
        await add(store, "Ana has a dog", seconds=t, entity=ANA, room=GENERAL, kind=MemoryKind.FACT)
    )
    keep.append(
        await add(store, "Bob sails", seconds=t, entity=BOB, room=GENERAL, kind=MemoryKind.FACT)
    )
    ana_ids = [m.id for m in ana if m.entity_id == ANA and m.kind is MemoryKind.MESSAGE]
    ana.append(
        await add(
            store,
            "Ana and Bob talked",
            seconds=t + 1,
            entity=ME,
            room=GENERAL,
            kind=MemoryKind.SUMMARY,
            metadata={"covers": [*ana_ids[3:], keep[2].id], "entities": [ANA, BOB]},
        )
    )
    ana.append(  # an older summary without "entities": found through what it covers
        await add(
            store,
            "Ana said hi",
            seconds=t + 2,
            entity=ME,
            room=DM_ANA,
            kind=MemoryKind.SUMMARY,
            metadata={"covers": ana_ids[:3]},
        )
    )
    keep.append(
        await add(
            store,
            "Bob said hi",
            seconds=t + 3,
            entity=ME,
            room=DM_BOB,
            kind=MemoryKind.SUMMARY,
            metadata={"covers": [keep[0].id], "entities": [BOB]},
        )
    )
    other = await add(store, "ana elsewhere", seconds=t, entity=ANA, room=DM_ANA, agent=OTHER_AGENT)
    return {"ana": ana, "keep": keep, "other": [other]}


async def everything(store: Store, agent_id: str = AGENT) -> list[Memory]:
    return [m async for m in iter_memories(store, agent_id=agent_id, page_size=3)]


async def test_forget_removes_a_person_across_rooms_and_nothing_else(store: Store) -> None:
    made = await conversation(store)
    for who, name in ((ANA, "Ana"), (BOB, "Bob")):
        await store.upsert_entity(
            Entity(id=who, agent_id=AGENT, platform="test", platform_id=name, names=[name])
        )
        await store.add_participant(GENERAL, who)

    report = await forget_entity(store, agent_id=AGENT, entity_id=ANA, page_size=2)
    assert report.entity and await store.get_entity(ANA) is None
    assert await store.list_participants(GENERAL) == [BOB]
    assert await store.get_entity(BOB) is not None

    assert (report.messages, report.facts, report.replies, report.summaries, report.other) == (
        6,
        1,
        6,
        2,
        0,
    )
    assert report.total == len(made["ana"]) and sorted(report.rooms) == sorted([DM_ANA, GENERAL])
    for memory in made["ana"]:
        assert await store.get_memory(memory.id) is None, memory.content.text
    assert sorted(m.id for m in await everything(store)) == sorted(m.id for m in made["keep"])
    assert [m.id for m in await everything(store, OTHER_AGENT)] == [made["other"][0].id]
    again = await forget_entity(store, agent_id=AGENT, entity_id=ANA)
    assert again.total == 0 and not again.entity


async def test_forget_can_keep_the_agents_replies(store: Store) -> None:
    made = await conversation(store)
    report = await forget_entity(store, agent_id=AGENT, entity_id=ANA, include_replies=False)
    assert report.replies == 0
    replies = [m for m in made["ana"] if m.entity_id == ME and m.kind is MemoryKind.MESSAGE]
    for reply in replies:
        assert await store.get_memory(reply.id) is not None


async def test_iter_memories_pages_through_shared_timestamps(store: Store) -> None:
    ids = []
    for i in range(7):  # seven memories of one instant, then three more
        ids.append((await add(store, f"same {i}", seconds=5, entity=ANA, room=GENERAL)).id)
    for i in range(3):
        ids.append((await add(store, f"later {i}", seconds=6 + i, entity=ANA, room=GENERAL)).id)
    for page_size in (1, 2, 3, 50):
        got = [m.id async for m in iter_memories(store, agent_id=AGENT, page_size=page_size)]
        assert sorted(got) == sorted(ids) and len(got) == len(ids), page_size
    with pytest.raises(ValueError, match="page_size"):
        [m async for m in iter_memories(store, agent_id=AGENT, page_size=0)]


@pytest.fixture
async def fresh(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "fresh.db") as s:
        yield s


async def rich_memories(store: Store) -> None:
    await conversation(store)
    await store.add_memory(
        Memory(
            agent_id=AGENT,
            room_id=GENERAL,
            entity_id=ANA,
            content=Content(
                text="with extras: ünïcode ✓ and a file",
                thought="private",
                actions=["REPLY"],
                source="discord",
                attachments=[Attachment(title="a.png", content_type="image/png", size=3)],
                metadata={"speaker": "Ana", "nested": {"a": [1, 2.5, None]}},
                plugin_field="kept",  # type: ignore[call-arg]  # Content keeps unknown keys
            ),
            status=MemoryStatus.FAILED,
            error="boom",
            created_at=at(100),
            updated_at=at(200),
        )
    )


async def test_export_import_round_trips_exactly(store: Store, fresh: SQLiteStore) -> None:
    await rich_memories(store)
    out = io.StringIO()
    count = await export_memories(store, out, agent_id=AGENT, embeddings=True, page_size=4)
    source = await everything(store)
    assert count == len(source) == len(out.getvalue().splitlines())

    report = await import_memories(fresh, io.StringIO(out.getvalue()), agent_id=AGENT)
    assert (report.imported, report.existing, report.errors) == (count, 0, [])
    for memory in source:
        assert await fresh.get_memory(memory.id) == memory

    again = io.StringIO()
    await export_memories(fresh, again, agent_id=AGENT, embeddings=True)
    assert sorted(again.getvalue().splitlines()) == sorted(out.getvalue().splitlines())

    twice = await import_memories(fresh, io.StringIO(out.getvalue()), agent_id=AGENT)
    assert (twice.imported, twice.existing, twice.errors) == (0, count, [])
    assert await fresh.count_memories(agent_id=AGENT) == count


async def test_export_without_embeddings_and_import_embeds(
    store: Store, fresh: SQLiteStore
) -> None:
    await conversation(store)
    out = io.StringIO()
    count = await export_memories(store, out, agent_id=AGENT, kinds=[MemoryKind.MESSAGE])
    lines = out.getvalue().splitlines()
    assert count == len(lines) == 20
    assert all("embedding" not in json.loads(line) for line in lines)

    embedder = HashEmbedder(dim=16)
    report = await import_memories(fresh, lines, agent_id=AGENT, embedder=embedder, batch_size=5)
    assert (report.imported, report.embedded) == (20, 20)
    hits = await fresh.search_memories(
        agent_id=AGENT,
        embedding=(await embedder.embed_one("bob room-dm-bob 1")).tolist(),
        embedding_model=embedder.model_id,
        k=1,
    )
    assert hits[0].memory.content.text == "bob room-dm-bob 1"


async def test_import_reports_bad_lines_and_imports_the_rest(
    store: Store, fresh: SQLiteStore
) -> None:
    good = [
        Memory(agent_id=AGENT, room_id="r", entity_id="e", content=Content(text=f"good {i}"))
        for i in range(3)
    ]
    taken = await fresh.add_memory(
        Memory(agent_id=OTHER_AGENT, room_id="r", entity_id="e", content=Content(text="theirs"))
    )
    lines = [
        good[0].model_dump_json(),
        "{not json",
        good[1].model_dump_json(),
        json.dumps({"id": "x", "room_id": "r"}),
        Memory(agent_id=OTHER_AGENT, room_id="r", entity_id="e").model_dump_json(),
        "[1, 2]",
        "",
        Memory(
            agent_id=AGENT, room_id="r", entity_id="e", embedding=[1.0, 0.0], embedding_model="m:3"
        ).model_dump_json(),
        good[0].model_copy(update={"id": taken.id}).model_dump_json(),
        json.dumps({**json.loads(good[2].model_dump_json()), "kind": "dream"}),
        good[2].model_dump_json(),
    ]
    report = await import_memories(fresh, lines, agent_id=AGENT, batch_size=2)

    assert report.imported == 3 and report.existing == 0
    assert [e.line for e in report.errors] == [2, 4, 5, 6, 8, 9, 10]
    messages = [str(e) for e in report.errors]
    assert messages[0].startswith("line 2: not JSON (")
    assert messages[1] == "line 4: agent_id: Field required (and 1 more)"
    assert (
        messages[2]
        == f"line 5: agent_id is '{OTHER_AGENT}', not '{AGENT}': it belongs to another agent"
    )
    assert messages[3] == "line 6: expected a JSON object (a memory), got list"
    assert messages[4] == "line 8: embedding has 2 dimensions, embedding_model 'm:3' says 3"
    assert messages[5] == f"line 9: id {taken.id} is used by another agent"
    assert messages[6].startswith("line 10: kind: Input should be 'message'")
    for memory in good:
        assert await fresh.get_memory(memory.id) == memory
    assert report.errors[0] == LineError(2, report.errors[0].message)
    assert not report.ok
