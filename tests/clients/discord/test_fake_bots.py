"""The fake Discord serves several bots: each token acts as its own bot over REST and the gateway.

Two plain discord.py clients (not Carrier's) log in to one fake with two tokens; the benchmarks
and deployment tests that run several agents rely on exactly this.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator

import pytest

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord

from clients.discord.fake import Bot, FakeDiscord

pytestmark = pytest.mark.asyncio


class Seen(discord.Client):
    """A discord.py client that keeps every message the gateway brought it."""

    def __init__(self) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.messages: list[discord.Message] = []

    async def on_message(self, message: discord.Message) -> None:
        self.messages.append(message)


@contextlib.asynccontextmanager
async def connected(token: str) -> AsyncIterator[Seen]:
    client = Seen()
    await client.login(token)
    task = asyncio.create_task(client.connect(reconnect=False))
    try:
        async with asyncio.timeout(10):
            await client.wait_until_ready()
        yield client
    finally:
        await client.close()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_two_bots_in_one_guild_each_act_as_themselves() -> None:
    async with FakeDiscord(bot_name="Harbor") as fake:
        guild = fake.add_guild("Jam Club", ["general"])
        pilot: Bot = fake.add_bot("Pilot", guilds=[guild])
        other = fake.add_guild("Elsewhere", ["lobby"])  # only the default bot is there
        ana = fake.add_member(guild, "ana")
        general = guild.channels["general"]
        assert pilot.token != fake.token and pilot.id != fake.bot_id

        async with connected(fake.token) as harbor, connected(pilot.token) as pilot_client:
            # Each identify gets its own bot's READY user, and only the guilds it is in.
            assert harbor.user is not None and harbor.user.id == fake.bot_id
            assert pilot_client.user is not None and pilot_client.user.id == pilot.id
            assert {g.id for g in harbor.guilds} == {guild.id, other.id}
            assert {g.id for g in pilot_client.guilds} == {guild.id}
            assert {s.bot_id for s in fake.gateway.sessions} == {fake.bot_id, pilot.id}

            # A message in the shared guild reaches both bots' sessions.
            posted = await fake.post(ana, "hello bots", channel=general)
            await fake.wait_until(
                lambda: all(
                    any(m.id == int(posted["id"]) for m in c.messages)
                    for c in (harbor, pilot_client)
                )
            )

            # Pilot replies over REST with its own token: the fake records Pilot as the author.
            channel = pilot_client.get_channel(general)
            assert isinstance(channel, discord.TextChannel)
            original = next(m for m in pilot_client.messages if m.id == int(posted["id"]))
            await channel.send("hi from Pilot", reference=original)
            [sent] = fake.sent
            assert sent.author_id == pilot.id
            assert int(sent.payload["message_reference"]["message_id"]) == int(posted["id"])
            # Its message comes back through the gateway to both bots, authored by Pilot.
            await fake.wait_until(
                lambda: all(
                    any(m.author.id == pilot.id for m in c.messages) for c in (harbor, pilot_client)
                )
            )

        # A token the fake does not know is refused, as Discord does.
        stranger = Seen()
        with pytest.raises(discord.LoginFailure):
            await stranger.login("not-a-known-token")
        await stranger.close()
