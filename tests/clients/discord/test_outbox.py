"""Discord's side of the outbox. A reply Discord refuses is failed with its answer, the message
with it. Replies a stopped process left unsent: the next process's client sends them once, on
ready, while they are fresh, and never when stale; a reply sent just before the stop (its record
lost) is not posted twice. Real discord.py over the loopback fake, a real SQLite file; "a
process" is a runtime over that file, "a restart" a new runtime and client over the same file."""

from __future__ import annotations

import asyncio
from typing import Any

from carrier.character import Character
from carrier.memory.fake import HashEmbedder
from carrier.outbox import reply_id
from carrier.runtime import AgentRuntime
from carrier.serving import Platforms
from carrier.types import Author, Channel, MemoryStatus, Message, RoomKind
from clients.discord import create_client
from clients.discord.client import DiscordClient
from tests.clients.discord.conftest import CHARACTER, Harness, xml

SENT, FAILED = MemoryStatus.SENT, MemoryStatus.FAILED


def restarted(h: Harness, *, window_s: float = 120.0) -> AgentRuntime:
    """The runtime of a new process over the same store and model."""
    return AgentRuntime(
        character=Character.model_validate(CHARACTER),
        store=h.store,
        embedder=HashEmbedder(),
        model=h.model,
        seed=7,
        fact_interval=10_000,
        reply_recovery_s=window_s,
    )


async def stopped_after_storing(h: Harness, text: str) -> tuple[int, str]:
    """Ana asks in #general; the process's turn stores its reply and the process stops before
    sending it. Returns the Discord message id and the stored message's id."""
    channel = h.channel("general")
    asked = h.fake.make_message(h.ana, text, channel=channel)  # in Discord, not yet handled
    result = await h.runtime.handle(
        Message(
            platform="discord",
            author=Author(platform_id=str(h.ana["id"]), name="ana"),
            channel=Channel(platform_id=str(channel), name="general", kind=RoomKind.GROUP),
            text=text,
            platform_message_id=str(asked["id"]),
            mentions_agent=True,
        )
    )
    assert [r.status for r in result.replies] == [MemoryStatus.PENDING]
    return int(asked["id"]), result.inbound_id


async def fate(h: Harness, inbound_id: str) -> tuple[object, ...]:
    inbound = await h.store.get_memory(inbound_id)
    reply = await h.store.get_memory(reply_id(inbound_id, 0))
    assert inbound is not None and reply is not None
    return inbound.status, reply.status, reply.error


async def test_outbox_a_fresh_reply_is_sent_once_on_ready(harness: Harness) -> None:
    h = harness
    asked, inbound_id = await stopped_after_storing(h, "when is the jam?")

    h.runtime = restarted(h)
    assert await h.runtime.start() == 1
    await h.start()
    await h.fake.wait_sent(h.channel("general"), 1)
    await h.fake.wait_until(lambda: not h.client.busy)

    [sent] = h.fake.sent
    assert sent.content == "echo: when is the jam?"
    assert sent.payload["message_reference"]["message_id"] == asked  # still a reply to Ana
    assert sent.payload["enforce_nonce"] is True
    assert await fate(h, inbound_id) == (MemoryStatus.PROCESSED, SENT, None)

    # Another restart finds nothing left to send.
    await h.client.stop()
    h.runtime = restarted(h)
    assert await h.runtime.start() == 0
    await h.start()
    await h.fake.wait_until(lambda: not h.client.busy)
    assert len(h.fake.sent) == 1


async def test_outbox_a_stale_reply_is_failed_and_not_sent(harness: Harness) -> None:
    h = harness
    _, inbound_id = await stopped_after_storing(h, "still there?")
    await asyncio.sleep(0.05)  # longer than the next process's window

    h.runtime = restarted(h, window_s=0.01)
    assert await h.runtime.start() == 1
    await h.start()
    await h.fake.wait_until(lambda: not h.client.busy)

    assert h.fake.sent == []
    reason = "not delivered within 0.01 s; the process stopped"
    assert await fate(h, inbound_id) == (FAILED, FAILED, reason)
    inbound = await h.store.get_memory(inbound_id)
    assert inbound is not None and inbound.error == reason


async def test_outbox_a_reply_sent_just_before_the_stop_is_not_posted_twice(
    harness: Harness,
) -> None:
    """The process sent the reply, then stopped before recording it (left ``sending``): the
    next one sends it again with the same nonce, and Discord answers with the message it has."""
    h = harness
    await h.start()
    await h.fake.post(h.ana, "hello there")
    await h.settle()
    [first] = h.fake.sent
    [inbound] = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    reply = reply_id(inbound.id, 0)
    assert await h.store.set_memory_status(reply, MemoryStatus.SENDING, expect=[SENT])
    assert await h.store.set_memory_status(
        inbound.id, MemoryStatus.PENDING, expect=[MemoryStatus.PROCESSED]
    )
    await h.client.stop()

    h.runtime = restarted(h)
    assert await h.runtime.start() == 1
    await h.start()
    await h.fake.wait_until(lambda: h.fake.rest.nonce_hits == 1)
    await h.fake.wait_until(lambda: not h.client.busy)

    assert [s.content for s in h.fake.sent] == [first.content]  # posted once
    assert await fate(h, inbound.id) == (MemoryStatus.PROCESSED, SENT, None)


async def test_outbox_a_refused_send_fails_the_reply_and_the_message(harness: Harness) -> None:
    """Discord refuses the reply (no permission to write there): the reply and the message are
    failed with Discord's answer, nothing is marked sent, and the client carries on."""
    h = harness
    await h.start()
    showcase = h.channel("showcase")
    h.fake.rest.refused[showcase] = (403, 50013, "Missing Permissions")
    await h.fake.post(h.ana, f"{h.mention()} look!", channel=showcase, mentions=[h.fake.bot])
    await h.settle()

    assert h.fake.sent == [] and h.client.stats.errors == 1
    [inbound] = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    status, reply_status, reply_error = await fate(h, inbound.id)
    assert (status, reply_status) == (FAILED, FAILED)
    assert reply_error == "not delivered: 403 Forbidden (error code: 50013): Missing Permissions"
    stored = await h.store.get_memory(inbound.id)
    assert stored is not None and stored.error == reply_error


async def stopped_before_answering(h: Harness, text: str) -> tuple[int, str]:
    """Ana asks in #general; the process gives the connection up (its turn cut) while the
    model thinks: the message is stored, ``received``, with no reply. Returns Discord's id and
    the stored id."""
    thinking = asyncio.Event()
    never = asyncio.Event()

    async def slow(request: Any) -> str:
        thinking.set()
        await never.wait()
        return xml("too late")

    h.answer = slow
    h.decision = "RESPOND"
    await h.start()
    posted = await h.fake.post(h.ana, f"{h.mention()} {text}", channel=h.channel("general"),
                               mentions=[h.fake.bot])  # fmt: skip
    await asyncio.wait_for(thinking.wait(), 10)
    # The process loses the connection's lease mid-turn: it closes at once, cutting the turn.
    await asyncio.wait_for(h.client.abandon(), 5)
    [inbound] = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    assert inbound.status is MemoryStatus.RECEIVED
    h.answer = lambda request: xml(f"echo: {request.query}")
    return int(posted["id"]), inbound.id


async def taken_over(h: Harness) -> DiscordClient:
    """A new process takes the connection over: its recovery leaves the fresh unanswered
    messages for its client, which runs them again once connected."""
    h.runtime = restarted(h)
    await h.runtime.start(recover=Platforms(exclude=frozenset({"discord"})))
    report = await h.runtime.outbox.recover(platforms=Platforms.of("discord"), resume=True)
    client = create_client(
        h.runtime,
        {},
        {"DISCORD_API_TOKEN": h.fake.token},
        discord_options={"guild_ready_timeout": 0.05},
        ready_timeout=10.0,
    )
    client.resume(report.resumable)
    await client.start()
    h.clients.append(client)
    return client


async def test_outbox_a_message_left_unanswered_is_answered_once_by_the_next_holder(
    harness: Harness,
) -> None:
    h = harness
    asked, inbound_id = await stopped_before_answering(h, "when is the jam?")
    assert h.fake.sent == []

    await taken_over(h)
    await h.fake.wait_sent(h.channel("general"), 1)
    await h.fake.wait_until(lambda: not h.client.busy)
    [sent] = h.fake.sent
    assert sent.content == "echo: when is the jam?"
    assert sent.payload["message_reference"]["message_id"] == asked
    assert await fate(h, inbound_id) == (MemoryStatus.PROCESSED, SENT, None)
    stored = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    assert [m.id for m in stored] == [inbound_id]  # the same stored message, run again

    # The next holder finds nothing left.
    await h.client.stop()
    h.runtime = restarted(h)
    report = await h.runtime.outbox.recover(platforms=Platforms.of("discord"), resume=True)
    assert (report.found, report.resumable) == (0, [])


async def test_outbox_a_left_message_discord_no_longer_has_is_failed_with_why(
    harness: Harness,
) -> None:
    h = harness
    asked, inbound_id = await stopped_before_answering(h, "anyone?")
    h.fake.delete_message(asked)

    await taken_over(h)
    await h.fake.wait_until(lambda: not h.client.busy)
    stored = await h.store.get_memory(inbound_id)
    assert stored is not None and stored.status is FAILED
    assert stored.error is not None and "Discord no longer has it" in stored.error
    assert h.fake.sent == []
