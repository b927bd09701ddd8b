"""A sharded bot split across processes: each shard a connection part leased on its own.

Discord sends a guild's events to one shard: ``(guild_id >> 22) % shard_count``; direct
messages come to shard 0. With ``shards`` set to a count, the bot's connection is made of that
many parts (:class:`carrier.clients.ConnectionPart`), so the processes sharing a store spread
them like separate bots, take a dead one's over and hand them over at a graceful stop. A part
runs its shard alone (``shardIds: [i]``) and owns the messages that came through it: those of
its guilds, and the direct messages for shard 0. With ``shards: auto`` the count is Discord's to
recommend at connection time, unknown beforehand, so the bot stays one connection (one lease).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from carrier.clients import ConnectionPart
from carrier.types import Memory
from clients.discord.config import parse_config

__all__ = ["connection_parts", "part_name", "shard_of", "within_shards"]

GUILD_KEY = "discord_guild_id"
"""Where an inbound message keeps its guild (``clients.discord.convert.to_message``)."""


def shard_of(guild_id: int | str | None, count: int) -> int:
    """The shard Discord sends a guild's events to; shard 0 for direct messages."""
    if guild_id is None or guild_id == "":
        return 0
    return (int(guild_id) >> 22) % count


def within_shards(ids: Collection[int], count: int) -> Callable[[Memory], bool]:
    """Whether a stored inbound message came through one of ``ids`` (of ``count`` shards)."""
    wanted = frozenset(ids)

    def covers(inbound: Memory) -> bool:
        return shard_of(inbound.content.metadata.get(GUILD_KEY), count) in wanted

    return covers


def part_name(shard: int, count: int) -> str:
    return f"{shard}/{count}"


def connection_parts(
    character: Any, config: Mapping[str, Any], environ: Mapping[str, str]
) -> list[ConnectionPart] | None:
    """The factory's ``connection_parts``: a part per shard when ``shards`` is a count of two
    or more and no ``shardIds`` were given; None (one connection) otherwise."""
    parsed = parse_config(config)
    if not isinstance(parsed.shards, int) or parsed.shards < 2 or parsed.shard_ids is not None:
        return None
    count = parsed.shards
    return [
        ConnectionPart(
            name=part_name(i, count),
            config={"shardIds": [i]},
            covers=within_shards([i], count),
        )
        for i in range(count)
    ]
