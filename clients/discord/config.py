"""``DiscordConfig``: the ``clientConfig.discord`` section of a character, validated.

ElizaOS names are accepted beside Carrier's (``shouldIgnoreBotMessages``,
``shouldRespondOnlyToMentions``, ``allowedChannelIds``, ...); unknown keys are kept. Anything a
server owner may want to differ per server can be overridden under ``guilds``::

    clientConfig:
      discord:
        allowedChannels: [general, "123456789012345678"]
        shouldRespondOnlyToMentions: true
        rateLimit: {messages: 8, perSeconds: 60}
        guilds:
          "987654321098765432": {shouldRespondOnlyToMentions: false}

Nothing here imports discord, so the configuration can be validated without it installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from carrier.errors import ConfigError

__all__ = [
    "DiscordConfig",
    "DiscordPolicy",
    "MentionPolicy",
    "RateLimit",
    "ReconnectPolicy",
    "parse_config",
]

DEFAULT_NOTICE = (
    "You're sending me messages faster than I can answer well. "
    "Give me a moment and I'll be right with you."
)


def _aliases(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


class MentionPolicy(_Model):
    """What a reply may ping. @everyone, @here and roles are never pinged, whatever is set."""

    users: bool | Literal["author"] = "author"
    """Which user mentions in the bot's text ping: ``"author"`` (the default) only the person
    being answered, so a steered model cannot ping strangers by id; ``true`` every user it
    mentions; ``false`` nobody."""
    replied_user: bool = False
    """Whether replying to a message pings its author."""
    everyone: Literal[False] = False
    roles: Literal[False] = False

    @field_validator("everyone", "roles", mode="before")
    @classmethod
    def _never(cls, value: Any) -> Any:
        if value not in (False, None, "false", 0):
            raise ValueError(
                "Carrier never pings @everyone, @here or roles; set it to false or remove it"
            )
        return False


class RateLimit(_Model):
    """At most ``messages`` turns per user every ``per_seconds``; one polite notice per window."""

    messages: int = Field(default=8, ge=1)
    per_seconds: float = Field(
        default=60.0, gt=0, validation_alias=_aliases("perSeconds", "per_seconds", "window")
    )
    notice: str = DEFAULT_NOTICE
    """Sent once per window to a user who goes over the limit; empty for no notice."""


class DiscordPolicy(_Model):
    """The settings that may differ per guild: when to answer and how to speak."""

    allowed_channels: list[str] = Field(
        default_factory=list,
        validation_alias=_aliases(
            "allowedChannels", "allowedChannelIds", "allowed_channels", "allowed_channel_ids"
        ),
    )
    """Channel ids or names (with or without ``#``); empty means every channel. Messages elsewhere
    are ignored unless they mention or reply to the bot. A thread follows its parent channel."""
    respond_only_to_mentions: bool = Field(
        default=False,
        validation_alias=_aliases(
            "shouldRespondOnlyToMentions", "respondOnlyToMentions", "respond_only_to_mentions"
        ),
    )
    """Outside DMs, answer only when mentioned (by id, name or nickname) or replied to."""
    respond_in_threads: bool = True
    """When false, threads are treated like channels outside ``allowed_channels``."""
    ignore_direct_messages: bool = Field(
        default=False,
        validation_alias=_aliases(
            "shouldIgnoreDirectMessages", "ignoreDirectMessages", "ignore_direct_messages"
        ),
    )
    ignore_bot_messages: bool = Field(
        default=True,
        validation_alias=_aliases(
            "shouldIgnoreBotMessages", "ignoreBotMessages", "ignore_bot_messages"
        ),
    )
    max_bot_turns: int = Field(
        default=3,
        ge=0,
        validation_alias=_aliases("maxBotTurns", "maxConsecutiveBotTurns", "max_bot_turns"),
    )
    """When bots are not ignored: how many bot messages in a row (per channel) are taken before
    the bot stops answering bots there, until a person speaks."""
    allowed_mentions: MentionPolicy = Field(default_factory=MentionPolicy)
    rate_limit: RateLimit | None = Field(default_factory=RateLimit)
    """Per-user limit; ``null`` or ``false`` turns it off."""
    max_message_length: int = Field(default=1900, ge=100, le=2000)
    """Longer replies are split into several messages of at most this many characters."""
    attachment_text_limit: int = Field(default=64 * 1024, ge=0)
    """How many bytes of a text attachment are read into the message."""

    @field_validator("allowed_channels", mode="before")
    @classmethod
    def _channels(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str | int):
            value = [value]
        if isinstance(value, list | tuple):
            out = []
            for item in value:
                if not isinstance(item, str | int) or isinstance(item, bool):
                    raise ValueError(f"expected channel ids or names, got {item!r}")
                name = str(item).strip().lstrip("#").strip()
                if name:
                    out.append(name)
            return out
        return value

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _rate_limit(cls, value: Any) -> Any:
        return None if value is False else value

    def allows_channel(self, *places: tuple[str | None, str | None]) -> bool:
        """Whether any of the ``(id, name)`` places (a channel, a thread's parent) is allowed."""
        if not self.allowed_channels:
            return True
        wanted = {c.lower() for c in self.allowed_channels}
        return any(
            (pid is not None and pid in wanted) or (name is not None and name.lower() in wanted)
            for pid, name in places
        )


class ReconnectPolicy(_Model):
    """How long to wait between connection attempts after a failure: ``initialSeconds``, then
    doubling (with jitter, ±50%) up to ``maxSeconds``; retried for as long as the client runs
    (see :mod:`clients.discord.reconnect`)."""

    initial_seconds: float = Field(default=1.0, gt=0, le=3600)
    max_seconds: float = Field(default=60.0, gt=0, le=3600)


class DiscordConfig(DiscordPolicy):
    """The whole ``clientConfig.discord`` section: a default policy, per-guild overrides, and
    connection settings that take effect when the client (re)starts."""

    shards: Literal["auto"] | int | None = None
    """``auto`` (Discord's recommendation) or a shard count; unset runs one unsharded connection."""
    shard_ids: list[int] | None = None
    """Run only these shards of ``shards`` (a count). Carrier sets it for each connection when
    several processes share a sharded bot (each shard is leased on its own); set by hand, it
    splits a bot across hosts statically."""
    members_intent: bool = False
    """Ask for the privileged Server Members intent (not needed for answering messages)."""
    guilds: dict[str, DiscordPolicy] = Field(default_factory=dict)
    """Overrides by guild id; only the keys given there replace the defaults above."""
    reconnect: ReconnectPolicy = Field(default_factory=ReconnectPolicy)
    """The backoff between connection attempts (applies when the client restarts)."""

    @field_validator("shards", mode="before")
    @classmethod
    def _shards(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ValueError("expected 'auto' or a shard count of at least 1")
        return value

    @model_validator(mode="after")
    def _shard_ids(self) -> DiscordConfig:
        if self.shard_ids is None:
            return self
        if not isinstance(self.shards, int):
            raise ValueError("shardIds needs shards set to a count (e.g. shards: 4)")
        wrong = [i for i in self.shard_ids if not 0 <= i < self.shards]
        if wrong or not self.shard_ids:
            raise ValueError(
                f"shardIds must name shards of 0..{self.shards - 1}"
                + (f"; {wrong} is not one" if wrong else "")
            )
        self.shard_ids = sorted(set(self.shard_ids))
        return self

    @property
    def sharding(self) -> tuple[list[int], int] | None:
        """The shards this connection runs and their count, when it runs a fixed set of a
        known count (None: unsharded, or ``auto``)."""
        if not isinstance(self.shards, int):
            return None
        return (self.shard_ids or list(range(self.shards)), self.shards)

    @field_validator("guilds", mode="before")
    @classmethod
    def _guild_keys(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): v for k, v in value.items()}
        return value

    def for_guild(self, guild_id: str | int | None) -> DiscordPolicy:
        """The policy for one guild: the defaults with that guild's overrides applied."""
        override = self.guilds.get(str(guild_id)) if guild_id is not None else None
        if override is None:
            return self
        changes = {name: getattr(override, name) for name in override.model_fields_set}
        return self.model_copy(update=changes)


def parse_config(
    data: Mapping[str, Any] | None, *, where: str = "clientConfig.discord"
) -> DiscordConfig:
    """Validate a ``clientConfig.discord`` mapping; :class:`ConfigError` names every bad field."""
    try:
        return DiscordConfig.model_validate(dict(data or {}))
    except ValidationError as exc:
        lines = [f"{where}: {exc.error_count()} problem(s)"]
        for error in exc.errors():
            path = ".".join(str(p) for p in (where, *error["loc"]))
            got = error.get("input")
            lines.append(f"  - {path}: {error['msg']} (got {got!r})")
        raise ConfigError("\n".join(lines)) from None
