"""A sharded bot's parts (``clients/discord/shards.py``) and the shard settings: what the host
leases and starts for each shard, and which stored messages each shard owns."""

from __future__ import annotations

import pytest

from carrier.character import parse_character
from carrier.errors import ConfigError
from carrier.types import Content, Memory
from clients.discord import connection_key, connection_parts, parse_config
from clients.discord.shards import shard_of, within_shards

ENV = {"DISCORD_API_TOKEN": "a-bot-token"}
CHARACTER = parse_character({"name": "Pilot", "bio": ["Guides ships."], "clients": ["discord"]})


def _inbound(guild_id: int | None) -> Memory:
    metadata = {} if guild_id is None else {"discord_guild_id": str(guild_id)}
    return Memory(
        agent_id="a", room_id="r", entity_id="e", content=Content(text="hi", metadata=metadata)
    )


def test_a_shard_count_makes_a_part_per_shard_each_running_its_shard_alone() -> None:
    parts = connection_parts(CHARACTER, {"shards": 3}, ENV)
    assert parts is not None
    assert [p.name for p in parts] == ["0/3", "1/3", "2/3"]
    assert [parse_config(dict(p.config, shards=3)).sharding for p in parts] == [
        ([0], 3),
        ([1], 3),
        ([2], 3),
    ]


@pytest.mark.parametrize(
    "config", [{}, {"shards": "auto"}, {"shards": 1}, {"shards": 4, "shardIds": [1, 2]}]
)
def test_one_connection_when_the_count_is_unknown_single_or_chosen_by_hand(config: dict) -> None:
    assert connection_parts(CHARACTER, config, ENV) is None


def test_the_connection_key_names_shards_chosen_by_hand_never_the_token() -> None:
    whole = connection_key(CHARACTER, {"shards": 4}, ENV)
    some = connection_key(CHARACTER, {"shards": 4, "shardIds": [2, 1]}, ENV)
    assert whole is not None and "a-bot-token" not in whole
    assert some == f"{whole}#1,2/4"
    assert connection_key(CHARACTER, {"shards": 4, "shardIds": [0, 1, 2, 3]}, ENV) == whole
    assert connection_key(CHARACTER, {}, {}) is None


def test_each_shard_owns_its_guilds_messages_and_shard_zero_the_direct_ones() -> None:
    guild = (1234567 << 22) + 99  # Discord: a guild's shard is (id >> 22) % count
    assert shard_of(guild, 4) == 1234567 % 4
    own, other = (
        within_shards([shard_of(guild, 4)], 4),
        within_shards([(shard_of(guild, 4) + 1) % 4], 4),
    )
    assert own(_inbound(guild)) and not other(_inbound(guild))
    assert within_shards([0], 4)(_inbound(None))
    assert not within_shards([1, 2, 3], 4)(_inbound(None))


def test_shard_ids_are_checked_against_the_count() -> None:
    assert parse_config({"shards": 4, "shardIds": [3, 1, 1]}).shard_ids == [1, 3]
    with pytest.raises(ConfigError, match="shardIds needs shards set to a count"):
        parse_config({"shardIds": [0]})
    with pytest.raises(ConfigError, match=r"shardIds must name shards of 0..1; \[5\] is not one"):
        parse_config({"shards": 2, "shardIds": [5]})
