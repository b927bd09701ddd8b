"""Attachments, reactions and threads become the right memories and rooms."""

from __future__ import annotations

from carrier.types import MemoryStatus, RoomKind, stable_id
from tests.clients.discord.conftest import Harness


async def test_events_image_and_text_attachments(harness: Harness) -> None:
    h = harness
    await h.start({"attachmentTextLimit": 40})
    image = h.fake.host("shot.png", b"\x89PNG" + b"\0" * 2044, "image/png")
    notes = h.fake.host(
        "notes.md", ("# Jam notes\n" + "idea " * 50).encode(), "text/markdown; charset=utf-8"
    )
    script = h.fake.host("player.gd", b"extends Node2D\n", "application/octet-stream")
    blob = h.fake.host("build.zip", b"PK" * 100, "application/zip")
    await h.fake.post(h.ana, "look at this", attachments=[image, notes, script, blob])
    await h.settle()

    [inbound] = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    got = {a.title: a for a in inbound.content.attachments}
    assert got["shot.png"].url == image["url"] and got["shot.png"].content_type == "image/png"
    assert got["shot.png"].size == 2048 and got["shot.png"].description == "image shot.png (2.0 KB)"
    assert got["shot.png"].text is None
    text = got["notes.md"].text or ""
    assert text.startswith("# Jam notes\nidea") and "[... truncated at 40 B]" in text
    # A known source suffix is read, whatever the content type says.
    assert got["player.gd"].text == "extends Node2D\n"
    assert (
        got["build.zip"].text is None and got["build.zip"].description == "file build.zip (200 B)"
    )
    assert h.fake.sent[0].content == "echo: look at this"


async def test_events_reactions_to_the_bot_are_stored(harness: Harness) -> None:
    h = harness
    await h.start()
    general = h.channel("general")
    await h.fake.post(
        h.ana, f"{h.mention()} tell me a joke", channel=general, mentions=[h.fake.bot]
    )
    await h.settle()
    bot_message = int(h.fake.sent[0].message["id"])
    await h.fake.react(h.ana, bot_message, "😂")
    await h.fake.react(h.ana, bot_message, "😂")  # redelivered: stored once
    await h.fake.react(h.otherbot, bot_message, "🤖")  # bots' reactions are not memories
    await h.settle()

    reactions = [
        m
        for m in await h.store.get_memories(agent_id=h.runtime.agent_id, room_id=h.room(general))
        if "reaction" in m.content.metadata
    ]
    assert len(reactions) == 1
    [memory] = reactions
    assert memory.content.metadata["reaction"] == "😂"
    assert memory.entity_id == h.entity(h.ana)
    assert memory.status is MemoryStatus.STORED
    agent_entity = stable_id(h.runtime.agent_id, "agent")
    replies = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=agent_entity)
    reply_ids = [m.id for m in replies]
    assert memory.content.in_reply_to in reply_ids
    assert h.fake.sent[-1].message["id"] == str(bot_message)  # no answer to a reaction


async def test_events_reactions_to_other_messages_are_ignored(harness: Harness) -> None:
    h = harness
    await h.start()
    posted = await h.fake.post(h.bob, "unrelated", channel=h.channel("random"))
    await h.fake.react(h.ana, int(posted["id"]), "👍")
    await h.settle()
    assert await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana)) == []


async def test_events_threads_map_to_thread_rooms_under_their_parent(harness: Harness) -> None:
    h = harness
    h.decision = "RESPOND"
    await h.start({"allowedChannels": ["general"]})
    thread = h.channel("jam-thread")
    # The parent channel is allowed, so the thread is too.
    await h.fake.post(h.ana, "thread chatter", channel=thread)
    await h.settle()
    room = await h.store.get_room(h.room(thread))
    assert room is not None and room.kind is RoomKind.THREAD
    assert room.parent_id == h.room(h.channel("general"))
    assert h.fake.sent[0].channel_id == thread


async def test_events_threads_can_be_turned_off(harness: Harness) -> None:
    h = harness
    h.decision = "RESPOND"
    await h.start({"respondInThreads": False})
    await h.fake.post(h.ana, "thread chatter", channel=h.channel("jam-thread"))
    await h.settle()
    assert h.fake.sent == []
    await h.fake.post(
        h.ana,
        f"{h.mention()} but you can answer this",
        channel=h.channel("jam-thread"),
        mentions=[h.fake.bot],
    )
    await h.settle()
    assert len(h.fake.sent) == 1
