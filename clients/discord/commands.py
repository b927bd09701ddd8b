"""Slash commands: /ask, /persona, /forget, /mute, /unmute, and syncing them with Discord.

Commands are registered with Discord deliberately, by :func:`sync_commands` (the CLI's
``carrier discord sync [--guild ID]``), not on every start: global syncs are rate limited and
take a while to spread, while a guild sync is instant (use it while testing).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import discord
from discord import app_commands

from carrier.errors import ConfigError
from carrier.pipeline.generate import failure_of
from carrier.types import Memory, Message, RoomState
from clients.discord.convert import PLATFORM, author_of, channel_of, is_room_admin
from clients.discord.policy import Verdict
from clients.discord.reactions import entity_id, room_id
from clients.discord.sender import allowed_mentions, outgoing_parts
from clients.discord.text import escape_mass_mentions

if TYPE_CHECKING:
    from clients.discord.client import DiscordClient

__all__ = ["SlashActions", "SlashHandler", "add_commands", "build_commands", "sync_commands"]

log = logging.getLogger(__name__)

_NO_PINGS = discord.AllowedMentions.none()
_NO_ANSWER = "I don't have an answer to that right now."


class SlashActions(Protocol):
    """What the commands do; :class:`SlashHandler` is the real one."""

    async def ask(self, interaction: discord.Interaction, question: str) -> None: ...
    async def persona(self, interaction: discord.Interaction) -> None: ...
    async def forget(self, interaction: discord.Interaction) -> None: ...
    async def mute(self, interaction: discord.Interaction, muted: bool) -> None: ...


def build_commands(actions: SlashActions) -> list[app_commands.Command[Any, Any, Any]]:
    @app_commands.command(name="ask", description="Ask the bot a question")
    @app_commands.describe(question="What do you want to ask?")
    async def ask(
        interaction: discord.Interaction, question: app_commands.Range[str, 1, 1500]
    ) -> None:
        await actions.ask(interaction, question)

    @app_commands.command(name="persona", description="Who is this bot?")
    async def persona(interaction: discord.Interaction) -> None:
        await actions.persona(interaction)

    @app_commands.command(name="forget", description="Erase everything the bot remembers about you")
    async def forget(interaction: discord.Interaction) -> None:
        await actions.forget(interaction)

    @app_commands.command(
        name="mute", description="Keep the bot quiet in this channel unless mentioned"
    )
    @app_commands.guild_only()
    @app_commands.default_permissions(manage_channels=True)
    @app_commands.checks.has_permissions(manage_channels=True)
    async def mute(interaction: discord.Interaction) -> None:
        await actions.mute(interaction, True)

    @app_commands.command(
        name="unmute", description="Let the bot join conversations in this channel again"
    )
    @app_commands.guild_only()
    @app_commands.default_permissions(manage_channels=True)
    @app_commands.checks.has_permissions(manage_channels=True)
    async def unmute(interaction: discord.Interaction) -> None:
        await actions.mute(interaction, False)

    return [ask, persona, forget, mute, unmute]


def add_commands(tree: app_commands.CommandTree[Any], actions: SlashActions) -> None:
    for command in build_commands(actions):
        tree.add_command(command)


class SlashHandler:
    """The commands, run against one client's runtime and store."""

    def __init__(self, client: DiscordClient) -> None:
        self._client = client

    async def ask(self, interaction: discord.Interaction, question: str) -> None:
        client = self._client
        policy = client.policy_for(interaction.guild)
        verdict = client.check_rate(interaction.user.id, policy)
        if verdict is not Verdict.ALLOW:
            notice = policy.rate_limit.notice if policy.rate_limit else ""
            await interaction.response.send_message(
                notice or "Please wait a moment.", ephemeral=True
            )
            return
        await interaction.response.defer(thinking=True)
        message = Message(
            platform=PLATFORM,
            author=author_of(
                interaction.user,
                is_admin=interaction.guild is not None and is_room_admin(interaction.permissions),
            ),
            channel=channel_of(interaction.channel, interaction.channel_id or 0),
            text=question,
            platform_message_id=str(interaction.id),
            mentions_agent=True,
            metadata={"discord_command": "ask"},
        )
        client.stats.turns += 1
        result = await client.runtime.handle(message)
        failure = failure_of(result)
        if failure is not None:  # no answer from the model: the apology, not the persona
            await interaction.followup.send(failure.notice, allowed_mentions=_NO_PINGS)
            client.stats.sent += 1
            return
        mentions = allowed_mentions(policy, author=interaction.user.id)

        async def follow_up(text: str) -> None:
            for part in outgoing_parts(text, policy):
                await interaction.followup.send(part, allowed_mentions=mentions)
                client.stats.sent += 1

        async def send(reply: Memory) -> None:
            await follow_up(reply.content.text)

        if not result.replies:
            await follow_up(_NO_ANSWER)
            return
        # Claimed, sent as follow-ups, then marked sent (or failed, with Discord's answer).
        await client.runtime.outbox.deliver(result.replies, send)

    async def persona(self, interaction: discord.Interaction) -> None:
        character = self._client.runtime.character
        bio = list(getattr(character, "bio", None) or [])
        line = bio[0] if bio else (getattr(character, "description", None) or "")
        text = escape_mass_mentions(f"**{character.name}**: {line}".strip().rstrip(":"))
        await interaction.response.send_message(text, ephemeral=True, allowed_mentions=_NO_PINGS)

    async def forget(self, interaction: discord.Interaction) -> None:
        runtime = self._client.runtime
        caller = entity_id(runtime.agent_id, interaction.user.id)
        count = (await runtime.forget(caller)).total
        log.info("discord: /forget by %s erased %d memories", interaction.user.id, count)
        await interaction.response.send_message(
            f"Done. I erased {count} {'memory' if count == 1 else 'memories'} about you.",
            ephemeral=True,
        )

    async def mute(self, interaction: discord.Interaction, muted: bool) -> None:
        runtime = self._client.runtime
        room = room_id(runtime.agent_id, interaction.channel_id or 0)
        await runtime.store.set_room_state(
            runtime.agent_id, room, RoomState.MUTED if muted else None
        )
        text = (
            "Okay, I'll stay quiet in this channel unless someone mentions me. /unmute to undo."
            if muted
            else "I'm back: I'll join conversations in this channel again."
        )
        await interaction.response.send_message(text, allowed_mentions=_NO_PINGS)

    async def on_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """Permission problems get a short private explanation; anything else is logged,
        counted and answered with an apology (the client carries on)."""
        if isinstance(error, app_commands.MissingPermissions | app_commands.NoPrivateMessage):
            text = (
                "That command only works in a server channel."
                if interaction.guild is None
                else "You need the Manage Channels permission to do that."
            )
        else:
            self._client.stats.errors += 1
            name = interaction.command.name if interaction.command else "?"
            log.error("discord: /%s failed", name, exc_info=error)
            text = "Sorry, something went wrong on my side. Please try again in a moment."
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True)
        else:
            await interaction.response.send_message(text, ephemeral=True)


class _Unused:
    """Command callbacks are never run while syncing; this only satisfies the signature."""

    async def ask(self, interaction: discord.Interaction, question: str) -> None: ...
    async def persona(self, interaction: discord.Interaction) -> None: ...
    async def forget(self, interaction: discord.Interaction) -> None: ...
    async def mute(self, interaction: discord.Interaction, muted: bool) -> None: ...


async def sync_commands(token: str, guild_id: int | str | None = None) -> list[str]:
    """Register the slash commands with Discord: in one guild (instant) when ``guild_id`` is
    given, else globally. Logs in over HTTP only (no gateway). Returns the synced names."""
    bot = discord.Client(intents=discord.Intents(guilds=True))  # HTTP only; never connects
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(bot)
    add_commands(tree, _Unused())
    try:
        try:
            await bot.login(token)
        except discord.LoginFailure as exc:
            raise ConfigError(
                "Discord refused the bot token (DISCORD_API_TOKEN): copy a fresh one from the "
                "Developer Portal (Bot → Reset Token)"
            ) from exc
        guild = discord.Object(id=int(guild_id)) if guild_id is not None else None
        if guild is not None:
            tree.copy_global_to(guild=guild)
        synced = await tree.sync(guild=guild)
    finally:
        await bot.close()
    names = [c.name for c in synced]
    log.info(
        "discord: synced %s %s", "to guild " + str(guild_id) if guild_id else "globally", names
    )
    return names
