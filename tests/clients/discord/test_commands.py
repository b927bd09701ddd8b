"""Slash commands through real INTERACTION_CREATE events, and syncing them deliberately."""

from __future__ import annotations

import discord
import pytest

from carrier.errors import ConfigError
from carrier.types import MemoryKind, RoomState
from clients.discord import sync_commands, sync_for_character
from clients.discord.fake.payloads import ALL_PERMISSIONS, MEMBER_PERMISSIONS
from tests.clients.discord.conftest import Harness

EPHEMERAL = 64
MANAGE = str(discord.Permissions(manage_channels=True).value | int(MEMBER_PERMISSIONS))


async def test_commands_forget_erases_the_callers_memories_only(harness: Harness) -> None:
    h = harness
    await h.start()
    general = h.channel("general")
    await h.fake.post(h.ana, "I'm Ana and I love pixel art")
    await h.fake.post(h.ana, f"{h.mention()} remember me", channel=general, mentions=[h.fake.bot])
    await h.fake.post(
        h.bob, f"{h.mention()} I'm Bob", channel=h.channel("random"), mentions=[h.fake.bot]
    )
    await h.settle()
    agent = h.runtime.agent_id
    assert await h.store.count_memories(agent_id=agent) == 6  # 3 messages, 3 replies
    ana_before = await h.store.get_memories(agent_id=agent, entity_id=h.entity(h.ana))
    assert len(ana_before) == 2

    await h.fake.slash(h.ana, "forget", channel=general)
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) == 1)

    [response] = h.fake.interaction_responses
    assert response["type"] == 4 and response["data"]["flags"] & EPHEMERAL
    # Her two messages, and the bot's two replies to them (a reply answers, often quotes her).
    assert response["data"]["content"] == "Done. I erased 4 memories about you."
    assert await h.store.get_memories(agent_id=agent, entity_id=h.entity(h.ana)) == []
    assert await h.store.get_entity(h.entity(h.ana)) is None  # her names are gone too
    assert len(await h.store.get_memories(agent_id=agent, entity_id=h.entity(h.bob))) == 1
    assert await h.store.count_memories(agent_id=agent, kinds=[MemoryKind.MESSAGE]) == 2
    assert await h.store.get_entity(h.entity(h.bob)) is not None


async def test_commands_ask_runs_a_turn_and_answers(harness: Harness) -> None:
    h = harness
    await h.start()
    await h.fake.slash(
        h.ana, "ask", channel=h.channel("random"), options={"question": "what is @everyone doing?"}
    )
    await h.fake.wait_until(lambda: len(h.fake.followups) == 1)

    assert h.fake.interaction_responses[0]["type"] == 5  # deferred: "Harbor is thinking..."
    [followup] = h.fake.followups
    assert followup["content"] == "echo: what is @\u200beveryone doing?"
    assert "everyone" not in followup["allowed_mentions"]["parse"]
    stored = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=h.entity(h.ana))
    assert [m.content.text for m in stored] == ["what is @everyone doing?"]


async def test_commands_persona_says_who_the_bot_is(harness: Harness) -> None:
    h = harness
    await h.start()
    await h.fake.slash(h.bob, "persona", channel=h.channel("general"))
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) == 1)
    data = h.fake.interaction_responses[0]["data"]
    assert data["content"] == "**Harbor**: Harbor hosts an indie game-dev Discord server."
    assert data["flags"] & EPHEMERAL


async def test_commands_mute_and_unmute_need_manage_channels(harness: Harness) -> None:
    h = harness
    await h.start()
    general = h.channel("general")
    room = h.room(general)

    await h.fake.slash(h.ana, "mute", channel=general)  # a regular member
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) == 1)
    denied = h.fake.interaction_responses[0]["data"]
    assert "Manage Channels" in denied["content"] and denied["flags"] & EPHEMERAL
    assert await h.store.get_room_state(h.runtime.agent_id, room) is None

    await h.fake.slash(h.bob, "mute", channel=general, permissions=MANAGE)
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) == 2)
    assert await h.store.get_room_state(h.runtime.agent_id, room) is RoomState.MUTED
    assert "stay quiet" in h.fake.interaction_responses[1]["data"]["content"]

    h.decision = "RESPOND"  # muted: the runtime does not even ask the model
    await h.fake.post(h.ana, "chatter", channel=general)
    await h.settle()
    assert h.fake.sent == [] and h.model.requests == []

    await h.fake.slash(h.bob, "unmute", channel=general, permissions=ALL_PERMISSIONS)
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) == 3)
    assert await h.store.get_room_state(h.runtime.agent_id, room) is None


async def test_commands_failure_is_reported_and_counted(harness: Harness) -> None:
    h = harness

    def boom(request):  # type: ignore[no-untyped-def]
        raise RuntimeError("model down")

    h.answer = boom
    client = await h.start()
    await h.fake.slash(h.ana, "ask", channel=h.channel("general"), options={"question": "hi"})
    await h.fake.wait_until(lambda: len(h.fake.followups) == 1)
    assert "something went wrong" in h.fake.followups[0]["content"]
    assert h.fake.followups[0]["flags"] & EPHEMERAL
    assert client.stats.errors == 1


async def test_commands_sync_globally_and_to_one_guild(harness: Harness) -> None:
    h = harness
    names = await sync_commands(h.fake.token)
    assert names == ["ask", "persona", "forget", "mute", "unmute"]
    synced = {c["name"]: c for c in h.fake.synced["global"]}
    assert synced["ask"]["options"][0]["name"] == "question"
    assert (
        int(synced["mute"]["default_member_permissions"])
        == discord.Permissions(manage_channels=True).value
    )
    assert synced["mute"]["contexts"] == [0]  # guild only
    assert synced["forget"].get("default_member_permissions") is None

    assert await sync_commands(h.fake.token, guild_id=h.guild.id) == names
    assert [c["name"] for c in h.fake.synced[str(h.guild.id)]] == names
    assert h.fake.gateway.identifies == []  # HTTP only, no gateway connection


async def test_commands_sync_needs_a_valid_token(harness: Harness) -> None:
    with pytest.raises(ConfigError, match="refused the bot token"):
        await sync_commands("wrong-token")
    with pytest.raises(ConfigError, match="DISCORD_API_TOKEN is not set"):
        await sync_for_character(harness.runtime.character, {})
    assert await sync_for_character(
        harness.runtime.character, {"DISCORD_API_TOKEN": harness.fake.token}, "1"
    )


async def test_commands_work_in_direct_messages(harness: Harness) -> None:
    h = harness
    await h.start()
    dm = h.fake.dm_channel(h.ana)
    await h.fake.slash(h.ana, "ask", channel=dm, options={"question": "hello from a DM"})
    await h.fake.wait_until(lambda: len(h.fake.followups) == 1)
    assert h.fake.followups[0]["content"] == "echo: hello from a DM"
    room = await h.store.get_room(h.room(dm))
    assert room is not None and room.kind.value == "dm"

    await h.fake.slash(h.ana, "mute", channel=dm)  # guild-only command
    await h.fake.wait_until(lambda: len(h.fake.interaction_responses) == 2)
    assert "server channel" in h.fake.interaction_responses[1]["data"]["content"]
