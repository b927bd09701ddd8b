"""When the bot answers: DMs, mentions (id, role, name, nickname), replies, allowed channels,
mention-only mode, other bots and bot loops. Real discord.py over the loopback fake."""

from __future__ import annotations

from carrier.types import MemoryKind, MemoryStatus, RoomKind
from tests.clients.discord.conftest import Harness


async def memories(h: Harness) -> list[str]:
    found = await h.store.get_memories(
        agent_id=h.runtime.agent_id, kinds=[MemoryKind.MESSAGE], limit=100
    )
    return [m.content.text for m in reversed(found)]


async def test_answering_dm_is_answered(harness: Harness) -> None:
    h = harness
    await h.start({"allowedChannels": ["general"], "shouldRespondOnlyToMentions": True})
    sent = await h.fake.post(h.ana, "hello there")
    await h.settle()

    assert [s.content for s in h.fake.sent] == ["echo: hello there"]
    reply = h.fake.sent[0]
    assert reply.channel_id == int(sent["channel_id"])
    assert reply.payload["message_reference"]["message_id"] == int(sent["id"])
    room = await h.store.get_room(h.room(int(sent["channel_id"])))
    assert room is not None and room.kind is RoomKind.DM
    assert await memories(h) == ["hello there", "echo: hello there"]


async def test_answering_mention_is_answered_anywhere_and_stripped(harness: Harness) -> None:
    h = harness
    await h.start({"allowedChannels": ["general"]})
    await h.fake.post(
        h.ana,
        f"{h.mention()} when does the jam start?",
        channel=h.channel("random"),
        mentions=[h.fake.bot],
    )
    await h.settle()

    assert [s.content for s in h.fake.sent] == ["echo: when does the jam start?"]
    assert [r.purpose for r in h.model.requests] == ["response"]  # no should-respond question
    inbound = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    assert inbound[0].content.text == "when does the jam start?"
    assert inbound[0].content.metadata["platform_message_id"]


async def test_answering_role_name_and_nickname_mentions(harness: Harness) -> None:
    h = harness
    h.fake.guilds[h.guild.id].members[h.fake.bot_id]["nick"] = "Cap"
    await h.start({"allowedChannels": ["general"], "shouldRespondOnlyToMentions": True})
    random = h.channel("random")
    await h.fake.post(
        h.ana, f"<@&{h.guild.bot_role}> hi role", channel=random, mention_roles=[h.guild.bot_role]
    )
    await h.settle()  # one at a time: a newer message in the same room supersedes a waiting one
    await h.fake.post(h.ana, "is harbor around?", channel=random)
    await h.settle()
    await h.fake.post(h.bob, "thanks cap", channel=random)
    await h.settle()
    await h.fake.post(h.bob, "caption this", channel=random)  # "cap" inside a word is not a mention
    await h.settle()

    assert sorted(s.content for s in h.fake.sent) == [
        "echo: hi role",
        "echo: is harbor around?",
        "echo: thanks cap",
    ]


async def test_answering_reply_to_the_bot_is_answered(harness: Harness) -> None:
    h = harness
    await h.start({"allowedChannels": ["general"], "shouldRespondOnlyToMentions": True})
    random = h.channel("random")
    await h.fake.post(h.ana, f"{h.mention()} hi", channel=random, mentions=[h.fake.bot])
    await h.settle()
    bot_message = int(h.fake.sent[0].message["id"])

    await h.fake.post(h.ana, "and what about teams?", channel=random, reply_to=bot_message)
    await h.settle()
    assert [s.content for s in h.fake.sent] == ["echo: hi", "echo: and what about teams?"]


async def test_answering_unrelated_chatter_in_other_channels_is_ignored(harness: Harness) -> None:
    h = harness
    await h.start({"allowedChannels": ["general"]})
    await h.fake.post(h.ana, "anyone playing the new roguelike?", channel=h.channel("random"))
    await h.settle()

    assert h.fake.sent == [] and h.fake.typing == []
    assert h.model.requests == []
    assert await memories(h) == []  # not even stored: the bot does not listen there
    assert (
        h.client.stats.ignored["channel is not in allowedChannels and the bot was not addressed"]
        == 1
    )


async def test_answering_chatter_in_allowed_channels_goes_through_the_runtime_policy(
    harness: Harness,
) -> None:
    h = harness
    await h.start({"allowedChannels": ["#General"]})
    general = h.channel("general")
    h.decision = "IGNORE"
    await h.fake.post(h.ana, "anyone playing the new roguelike?", channel=general)
    await h.settle()
    assert h.fake.sent == [] and h.fake.typing == []
    assert [r.purpose for r in h.model.requests] == ["should_respond"]
    stored = await h.store.get_memories(agent_id=h.runtime.agent_id, room_id=h.room(general))
    assert stored[0].status is MemoryStatus.IGNORED

    h.decision = "RESPOND"
    await h.fake.post(h.bob, "what makes a good jam theme?", channel=general)
    await h.settle()
    assert [s.content for s in h.fake.sent] == ["echo: what makes a good jam theme?"]
    assert h.fake.typing == [general]  # shown once the model decided to answer


async def test_answering_mention_only_mode_skips_the_model(harness: Harness) -> None:
    h = harness
    await h.start({"shouldRespondOnlyToMentions": True})
    await h.fake.post(h.ana, "anyone around?", channel=h.channel("general"))
    await h.settle()
    assert h.fake.sent == [] and h.model.requests == []


async def test_answering_mention_only_mode_keeps_the_conversation(harness: Harness) -> None:
    # The bot reads along: what was said before it was mentioned is in the room's history.
    h = harness
    await h.start({"shouldRespondOnlyToMentions": True})
    general = h.channel("general")
    await h.fake.post(h.ana, "the jam theme is lighthouses", channel=general)
    await h.settle()
    assert h.fake.sent == [] and h.model.requests == []  # stored, not answered, no model call
    await h.fake.post(
        h.bob, f"{h.mention()} what is the theme?", channel=general, mentions=[h.fake.bot]
    )
    await h.settle()

    assert [s.content for s in h.fake.sent] == ["echo: what is the theme?"]
    prompt = h.model.requests[-1].messages[1].content  # the data message: the conversation
    assert isinstance(prompt, str) and "the jam theme is lighthouses" in prompt
    found = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    assert [m.content.text for m in found] == ["the jam theme is lighthouses"]
    assert found[0].status is MemoryStatus.IGNORED and found[0].embedding is not None
    assert "mention-only" in found[0].content.metadata["observed"]
    assert h.client.stats.observed == 1


async def test_answering_guild_override_applies_to_that_guild(harness: Harness) -> None:
    h = harness
    h.decision = "RESPOND"
    await h.start(
        {
            "shouldRespondOnlyToMentions": True,
            "guilds": {str(h.guild.id): {"shouldRespondOnlyToMentions": False}},
        }
    )
    await h.fake.post(h.ana, "anyone around?", channel=h.channel("general"))
    await h.settle()
    assert [s.content for s in h.fake.sent] == ["echo: anyone around?"]


async def test_answering_other_bots_are_ignored(harness: Harness) -> None:
    h = harness
    await h.start()
    await h.fake.post(
        h.otherbot, f"{h.mention()} beep", channel=h.channel("general"), mentions=[h.fake.bot]
    )
    await h.fake.post(h.otherbot, "beep in a DM")
    await h.settle()
    assert h.fake.sent == [] and h.model.requests == []
    assert h.client.stats.ignored["bot messages are ignored (shouldIgnoreBotMessages)"] == 2


async def test_answering_own_messages_are_ignored(harness: Harness) -> None:
    h = harness
    await h.start()
    await h.fake.post(h.ana, "hi")
    await h.settle()
    assert len(h.fake.sent) == 1
    assert h.client.stats.ignored["own message"] == 1  # the gateway echo of its own reply


async def test_answering_bot_loop_is_cut_after_n_turns(harness: Harness) -> None:
    h = harness
    await h.start({"shouldIgnoreBotMessages": False, "maxBotTurns": 2})
    general = h.channel("general")
    for i in range(4):
        await h.fake.post(
            h.otherbot, f"{h.mention()} ping {i}", channel=general, mentions=[h.fake.bot]
        )
        await h.settle()
    assert [s.content for s in h.fake.sent] == ["echo: ping 0", "echo: ping 1"]
    assert h.client.stats.ignored["bot loop: too many bot turns in a row"] == 2

    # A person speaks: the count resets.
    await h.fake.post(h.ana, "ok bots, one more", channel=general)
    await h.fake.post(h.otherbot, f"{h.mention()} ping 4", channel=general, mentions=[h.fake.bot])
    await h.settle()
    assert h.fake.sent[-1].content == "echo: ping 4"


async def test_answering_direct_messages_can_be_turned_off(harness: Harness) -> None:
    h = harness
    await h.start({"shouldIgnoreDirectMessages": True})
    await h.fake.post(h.ana, "hello?")
    await h.settle()
    assert h.fake.sent == [] and h.model.requests == []
