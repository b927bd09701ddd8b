"""The discord.py client for one agent: explicit intents, safe default mentions, sharding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import discord

from clients.discord.config import DiscordConfig
from clients.discord.sender import allowed_mentions

__all__ = ["build_bot", "build_intents"]


def build_intents(config: DiscordConfig) -> discord.Intents:
    """Exactly what the client uses: guilds, messages (with their content), reactions."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True  # privileged: enabled in the Developer Portal
    intents.guild_reactions = True
    intents.dm_reactions = True
    intents.members = config.members_intent  # privileged, off unless asked for
    return intents


def build_bot(config: DiscordConfig, options: Mapping[str, Any]) -> discord.Client:
    """A ``discord.Client``, or an ``AutoShardedClient`` when ``shards`` is set (``auto`` lets
    Discord recommend the count). discord.py owns reconnecting and resuming with backoff."""
    kwargs: dict[str, Any] = {
        "intents": build_intents(config),
        "allowed_mentions": allowed_mentions(config),  # a safety net; every send passes its own
        "chunk_guilds_at_startup": config.members_intent,
        **options,
    }
    for flag in ("warn_nacl", "warn_dave"):  # Carrier never joins voice; skip those warnings
        if hasattr(discord.VoiceClient, flag):
            setattr(discord.VoiceClient, flag, False)
    if config.shards is None:
        return discord.Client(**kwargs)
    shard_count = None if config.shards == "auto" else config.shards
    return discord.AutoShardedClient(shard_count=shard_count, **kwargs)
