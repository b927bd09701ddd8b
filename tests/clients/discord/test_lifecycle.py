"""Starting, refusing to start with a clear reason, sharding, resuming, stopping, live config."""

from __future__ import annotations

import asyncio
import sys

import discord
import pytest

from carrier.character import Character
from carrier.clients import ClientUnavailable
from carrier.errors import ConfigError
from carrier.llm.base import ModelRequest
from clients.discord import create_client
from clients.discord.config import parse_config
from clients.discord.connection import build_intents
from clients.discord.fake import FakeDiscord
from tests.clients.discord.conftest import CHARACTER, Harness, xml


def test_lifecycle_missing_token_says_what_to_set(harness: Harness) -> None:
    with pytest.raises(ClientUnavailable) as info:
        create_client(harness.runtime, {}, {})
    assert "DISCORD_API_TOKEN is not set" in str(info.value)
    assert "settings.secrets.DISCORD_API_TOKEN: $DISCORD_API_TOKEN" in str(info.value)


def test_lifecycle_token_comes_from_the_characters_own_reference(harness: Harness) -> None:
    character = Character.model_validate(
        {**CHARACTER, "secrets": {"DISCORD_API_TOKEN": {"env": "SAGE_DISCORD_TOKEN"}}}
    )
    harness.runtime.character = character
    client = create_client(
        harness.runtime, {}, {"SAGE_DISCORD_TOKEN": "sage-token", "DISCORD_API_TOKEN": "other"}
    )
    assert client._token == "sage-token"


def test_lifecycle_discord_not_installed_gives_the_pip_command(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "discord", None)  # import discord → ImportError
    with pytest.raises(
        ClientUnavailable, match=r"discord\.py, which is not installed: run `make install`"
    ):
        create_client(harness.runtime, {}, {"DISCORD_API_TOKEN": "t"})


def test_lifecycle_invalid_config_names_the_field(harness: Harness) -> None:
    with pytest.raises(ClientUnavailable, match=r"clientConfig\.discord\.maxBotTurns"):
        create_client(harness.runtime, {"maxBotTurns": "lots"}, {"DISCORD_API_TOKEN": "t"})


def test_lifecycle_intents_are_explicit() -> None:
    intents = build_intents(parse_config({}))
    assert (
        intents.message_content
        and intents.guilds
        and intents.guild_messages
        and intents.dm_messages
    )
    assert intents.guild_reactions and not intents.members and not intents.presences
    assert build_intents(parse_config({"membersIntent": True})).members


async def test_lifecycle_connects_with_those_intents(harness: Harness) -> None:
    client = await harness.start()
    [identify] = harness.fake.gateway.identifies
    assert identify["intents"] == build_intents(client.config).value
    assert identify["token"] == harness.fake.token
    assert client.bot.is_ready() and [g.name for g in client.bot.guilds] == ["Jam Club"]


async def test_lifecycle_privileged_intents_refusal_gives_the_fix(harness: Harness) -> None:
    harness.fake.enabled_intents = 0  # the owner never enabled Message Content in the portal
    with pytest.raises(ClientUnavailable) as info:
        await harness.start()
    text = str(info.value)
    assert "4014" in text and '"Message Content Intent"' in text
    assert "https://discord.com/developers/applications" in text
    assert isinstance(info.value.__cause__, discord.PrivilegedIntentsRequired)


async def test_lifecycle_refused_token_gives_the_fix(harness: Harness) -> None:
    with pytest.raises(ClientUnavailable, match="refused the bot token"):
        await create_client(
            harness.runtime,
            {},
            {"DISCORD_API_TOKEN": "wrong"},
            discord_options={"guild_ready_timeout": 0.05},
        ).start()


async def test_lifecycle_sharded_when_configured(harness: Harness) -> None:
    client = await harness.start({"shards": "auto"})
    assert isinstance(client.bot, discord.AutoShardedClient)
    assert harness.fake.gateway.identifies[0]["shard"] == [0, 1]
    await harness.fake.post(harness.ana, "hello shard")
    await harness.settle()
    assert [s.content for s in harness.fake.sent] == ["echo: hello shard"]


async def test_lifecycle_two_shards_split_the_guilds(harness: Harness) -> None:
    async with FakeDiscord(shards=2) as fake:
        fake.add_guild("A")
        fake.add_guild("B")
        client = create_client(
            harness.runtime, {"shards": 2}, {"DISCORD_API_TOKEN": fake.token},
            discord_options={"guild_ready_timeout": 0.05}, ready_timeout=20,
        )  # fmt: skip
        # discord.py waits 5 s before identifying a second shard (Discord's identify rate limit).
        await client.start()
        try:
            assert sorted(i["shard"][0] for i in fake.gateway.identifies) == [0, 1]
            assert sorted(g.name for g in client.bot.guilds) == ["A", "B"]
        finally:
            await client.stop()


async def test_lifecycle_reconnect_resumes_and_keeps_answering(harness: Harness) -> None:
    client = await harness.start()
    await harness.fake.post(harness.ana, "before")
    await harness.settle()
    await harness.fake.request_reconnect()  # Discord asks the bot to reconnect (op 7)
    await harness.fake.wait_until(
        lambda: len(harness.fake.gateway.resumes) == 1 and bool(harness.fake.gateway.sessions)
    )
    assert harness.fake.gateway.resumes[0]["session_id"]
    await harness.fake.post(harness.ana, "after")
    await harness.settle()
    assert [s.content for s in harness.fake.sent] == ["echo: before", "echo: after"]
    assert len(harness.fake.gateway.identifies) == 1  # resumed, not re-identified
    assert client.stats.errors == 0


async def test_lifecycle_stop_lets_a_running_turn_finish_and_is_idempotent(
    harness: Harness,
) -> None:
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        await asyncio.sleep(0.2)
        return xml("finished before shutdown")

    harness.answer = slow
    client = await harness.start()
    await harness.fake.post(harness.ana, "long question")
    await started.wait()
    await client.stop()
    await client.stop()
    assert [s.content for s in harness.fake.sent] == ["finished before shutdown"]
    assert client.bot.is_closed()


async def test_lifecycle_stop_cancels_turns_past_the_grace_period(harness: Harness) -> None:
    started = asyncio.Event()

    async def stuck(request: ModelRequest) -> str:
        started.set()
        await asyncio.sleep(30)
        return xml("never")

    harness.answer = stuck
    client = await harness.start()
    client._stop_grace = 0.05
    await harness.fake.post(harness.ana, "long question")
    await started.wait()
    await client.stop()
    assert harness.fake.sent == []
    assert client.bot.is_closed()


async def test_lifecycle_update_config_applies_without_restart(harness: Harness) -> None:
    client = await harness.start({"allowedChannels": ["general"]})
    harness.decision = "RESPOND"
    await harness.fake.post(harness.ana, "chatter", channel=harness.channel("random"))
    await harness.settle()
    assert harness.fake.sent == []

    client.update_config({"allowedChannels": ["random"]})
    await harness.fake.post(harness.ana, "chatter again", channel=harness.channel("random"))
    await harness.settle()
    assert [s.content for s in harness.fake.sent] == ["echo: chatter again"]

    with pytest.raises(ConfigError, match=r"allowedMentions\.everyone"):
        client.update_config({"allowedMentions": {"everyone": True}})
    assert client.config.allowed_channels == ["random"]  # the bad update changed nothing


async def test_lifecycle_stop_before_start_is_harmless(harness: Harness) -> None:
    client = create_client(harness.runtime, {}, {"DISCORD_API_TOKEN": harness.fake.token})
    await client.stop()
    assert not client.running
    with pytest.raises(RuntimeError, match="create a new one"):
        await client.start()


async def test_lifecycle_errors_in_other_handlers_are_counted_and_survived(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    client = await h.start()
    await h.fake.post(h.ana, "hi")
    await h.settle()
    bot_message = int(h.fake.sent[0].message["id"])

    async def broken(memory):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk full")

    monkeypatch.setattr(h.store, "add_memory", broken)
    await h.fake.react(h.ana, bot_message, "👍")  # storing the reaction fails → on_error
    await h.settle()
    assert client.stats.errors == 1 and client.running
    monkeypatch.undo()
    await h.fake.post(h.ana, "still there?")
    await h.settle()
    assert h.fake.sent[-1].content == "echo: still there?"
