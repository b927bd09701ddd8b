"""DiscordConfig: ElizaOS names, unknown keys kept, per-guild overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from carrier.character import load_character
from carrier.errors import ConfigError
from clients.discord.config import DiscordConfig, parse_config

ROOT = Path(__file__).resolve().parents[3]


def test_config_defaults_are_safe() -> None:
    config = parse_config({})
    assert config.allowed_channels == []
    assert config.ignore_bot_messages is True
    assert config.ignore_direct_messages is False
    assert config.respond_only_to_mentions is False
    assert config.allowed_mentions.everyone is False and config.allowed_mentions.roles is False
    assert config.allowed_mentions.replied_user is False
    assert config.rate_limit is not None and config.rate_limit.messages >= 1
    assert config.shards is None


def test_config_accepts_elizaos_names_and_keeps_unknown_keys() -> None:
    config = parse_config(
        {
            "allowedChannelIds": ["123", 456, "#general"],
            "shouldIgnoreBotMessages": False,
            "shouldIgnoreDirectMessages": True,
            "shouldRespondOnlyToMentions": True,
            "maxConsecutiveBotTurns": 5,
            "rateLimit": {"messages": 3, "perSeconds": 10},
            "allowedMentions": {
                "users": False,
                "repliedUser": True,
                "everyone": False,
                "roles": False,
            },
            "shards": "auto",
            "autoPost": {"enabled": False},
        }
    )
    assert config.allowed_channels == ["123", "456", "general"]
    assert config.ignore_bot_messages is False and config.ignore_direct_messages is True
    assert config.respond_only_to_mentions is True and config.max_bot_turns == 5
    assert config.rate_limit is not None and (
        config.rate_limit.messages,
        config.rate_limit.per_seconds,
    ) == (3, 10)
    assert config.allowed_mentions.users is False and config.allowed_mentions.replied_user is True
    assert config.shards == "auto"
    assert config.model_extra == {"autoPost": {"enabled": False}}


@pytest.mark.parametrize("path", ["characters/harbor.yaml", "characters/sage.json"])
def test_config_example_characters_parse(path: str) -> None:
    character = load_character(ROOT / path)
    config = parse_config(character.client_config.get("discord", {}))
    assert config.allowed_channels
    assert config.respond_only_to_mentions is True
    assert config.allows_channel(("1", config.allowed_channels[0]))


def test_config_allowed_channels_match_ids_names_and_thread_parents() -> None:
    config = parse_config({"allowedChannels": ["General", "42"]})
    assert config.allows_channel(("7", "general"))
    assert config.allows_channel(("42", "anything"))
    assert not config.allows_channel(("7", "random"))
    # A thread of an allowed channel is allowed.
    assert config.allows_channel(("99", "some-thread"), ("42", None))
    assert parse_config({}).allows_channel(("1", "random"))  # no list: every channel


def test_config_guild_overrides_replace_only_what_they_set() -> None:
    config = parse_config(
        {
            "allowedChannels": ["general"],
            "shouldRespondOnlyToMentions": True,
            "guilds": {111: {"shouldRespondOnlyToMentions": False, "rateLimit": False}},
        }
    )
    guild = config.for_guild(111)
    assert guild.respond_only_to_mentions is False
    assert guild.rate_limit is None
    assert guild.allowed_channels == ["general"]  # inherited
    assert config.for_guild(222) is config
    assert config.for_guild(None) is config


def test_config_errors_name_the_field_and_what_was_expected() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "maxBotTurns": -1,
                "allowedMentions": {"everyone": True},
                "shards": 0,
                "guilds": {"1": {"rateLimit": {"messages": 0}}},
            }
        )
    text = str(info.value)
    assert "clientConfig.discord: 4 problem(s)" in text
    assert "never pings @everyone" in text
    assert "maxBotTurns" in text
    assert "shard count" in text
    assert "guilds.1.rateLimit.messages" in text


def test_config_rejects_a_non_list_of_channels() -> None:
    with pytest.raises(ConfigError, match="allowedChannels"):
        parse_config({"allowedChannels": [{"id": 1}]})


def test_config_is_a_pydantic_model_with_round_trip() -> None:
    config = parse_config({"allowedChannels": ["general"], "custom": 1})
    again = DiscordConfig.model_validate(config.model_dump(by_alias=True))
    assert again == config
