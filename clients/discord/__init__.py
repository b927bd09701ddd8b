"""The Discord client: a persona as a community bot that behaves like a good citizen.

Registered under the ``carrier.clients`` entry-point group as ``discord``; ``carrier run`` calls
:func:`create_client` for every agent whose character lists ``discord`` in ``clients``.

Importing this package does not import discord.py, so a missing install is reported by
:func:`create_client` with the command to run, and the configuration and the message splitter
work without it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from carrier.clients import ClientRefused, ClientUnavailable
from carrier.errors import ConfigError
from clients.discord.config import DiscordConfig, DiscordPolicy, parse_config
from clients.discord.errors import INSTALL, NO_TOKEN
from clients.discord.shards import connection_parts
from clients.discord.split import split_message

if TYPE_CHECKING:
    from clients.discord.client import DiscordClient

__all__ = [
    "DiscordConfig",
    "DiscordPolicy",
    "connection_key",
    "connection_parts",
    "create_client",
    "parse_config",
    "split_message",
    "sync_commands",
    "sync_for_character",
]


def create_client(
    runtime: Any,
    config: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    discord_options: Mapping[str, Any] | None = None,
    ready_timeout: float = 60.0,
) -> DiscordClient:
    """The ``carrier.clients`` factory: a Discord client for ``runtime``'s agent.

    The token is the character's ``DISCORD_API_TOKEN`` secret, resolved from ``environ`` (so two
    personas can run two bots). Raises :class:`ClientUnavailable` when discord.py is missing,
    or the token is unset (the client is not configured here), and :class:`ClientRefused` when
    the configuration is invalid (it is, but wrongly: the client's state is ``failed``), saying
    what to do.
    """
    try:
        import discord  # noqa: F401
    except ImportError as exc:
        raise ClientUnavailable(INSTALL) from exc
    token = runtime.character.resolve_secret("DISCORD_API_TOKEN", environ)
    if not token:
        raise ClientUnavailable(NO_TOKEN)
    try:
        parsed = parse_config(config)
    except ConfigError as exc:
        raise ClientRefused(str(exc)) from exc
    from clients.discord.client import DiscordClient

    return DiscordClient(
        runtime=runtime,
        token=token,
        config=parsed,
        discord_options=discord_options,
        ready_timeout=ready_timeout,
    )


def connection_key(
    character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
) -> str | None:
    """The account a client of ``character`` connects as: a digest of its bot token (never the
    token), so one live connection per token across processes (:mod:`carrier.agents.leases`);
    None without a token. Shards given by hand (``shardIds``) are part of it: another process
    may run the bot's other shards. (A shard count without ``shardIds`` makes a part per shard:
    :mod:`clients.discord.shards`.)"""
    token = character.resolve_secret("DISCORD_API_TOKEN", environ)
    if not token:
        return None
    key = hashlib.sha256(token.encode("utf-8")).hexdigest()[:24]
    sharding = parse_config(config).sharding
    if sharding is not None and len(sharding[0]) < sharding[1]:
        # Some shards only (``shardIds`` set by hand): another process may run the others.
        key += f"#{','.join(map(str, sharding[0]))}/{sharding[1]}"
    return key


create_client.connection_key = connection_key  # type: ignore[attr-defined]
create_client.connection_parts = connection_parts  # type: ignore[attr-defined]
# What POST /clients/discord/config (and the console) validate a configuration against.
create_client.config_model = DiscordConfig  # type: ignore[attr-defined]


async def sync_commands(token: str, guild_id: int | str | None = None) -> list[str]:
    """Register the slash commands with Discord (see :mod:`clients.discord.commands`)."""
    try:
        from clients.discord.commands import sync_commands as sync
    except ImportError as exc:
        raise ConfigError(INSTALL) from exc
    return await sync(token, guild_id)


async def sync_for_character(
    character: Any, environ: Mapping[str, str], guild_id: int | str | None = None
) -> list[str]:
    """Sync with the character's own bot token (what ``carrier discord sync`` runs)."""
    token = character.resolve_secret("DISCORD_API_TOKEN", environ)
    if not token:
        raise ConfigError(NO_TOKEN)
    return await sync_commands(token, guild_id)
