"""JSON payloads in Discord's API shapes (v10), for the fake server in :mod:`.server`."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import discord

__all__ = [
    "Ids",
    "Json",
    "channel",
    "dm_channel",
    "guild",
    "member",
    "message",
    "now",
    "role",
    "thread",
    "user",
]

Json = dict[str, Any]

ALL_PERMISSIONS = str(discord.Permissions.all().value)
MEMBER_PERMISSIONS = str(
    discord.Permissions(
        view_channel=True,
        send_messages=True,
        send_messages_in_threads=True,
        read_message_history=True,
        add_reactions=True,
        embed_links=True,
        attach_files=True,
        use_application_commands=True,
    ).value
)
"""What an ordinary member may do in a channel (no moderation rights)."""


class Ids:
    """Snowflakes that increase and carry the current time, as Discord's do."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def __call__(self) -> int:
        return discord.utils.time_snowflake(datetime.now(UTC)) + next(self._counter)


def now() -> str:
    return datetime.now(UTC).isoformat()


def user(uid: int, name: str, *, bot: bool = False, global_name: str | None = None) -> Json:
    return {
        "id": str(uid),
        "username": name,
        "discriminator": "0",
        "global_name": global_name,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def member(user_data: Json, *, nick: str | None = None, roles: list[int] | None = None) -> Json:
    return {
        "user": user_data,
        "nick": nick,
        "roles": [str(r) for r in roles or []],
        "joined_at": now(),
        "deaf": False,
        "mute": False,
        "flags": 0,
        "avatar": None,
        "pending": False,
    }


def role(
    rid: int, name: str, *, permissions: str = MEMBER_PERMISSIONS, bot_id: int | None = None
) -> Json:
    data: Json = {
        "id": str(rid),
        "name": name,
        "color": 0,
        "hoist": False,
        "position": 1 if bot_id else 0,
        "permissions": permissions,
        "managed": bot_id is not None,
        "mentionable": False,
        "flags": 0,
    }
    if bot_id is not None:
        data["tags"] = {"bot_id": str(bot_id)}
    return data


def channel(cid: int, guild_id: int, name: str, position: int = 0) -> Json:
    return {
        "id": str(cid),
        "type": 0,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "rate_limit_per_user": 0,
        "last_message_id": None,
    }


def thread(tid: int, guild_id: int, parent_id: int, owner_id: int, name: str) -> Json:
    return {
        "id": str(tid),
        "type": 11,
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "owner_id": str(owner_id),
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": now(),
            "locked": False,
        },
    }


def dm_channel(cid: int, recipient: Json) -> Json:
    return {"id": str(cid), "type": 1, "recipients": [recipient], "last_message_id": None}


def guild(
    gid: int,
    name: str,
    *,
    owner_id: int,
    roles: list[Json],
    channels: list[Json],
    threads: list[Json],
    members: list[Json],
) -> Json:
    return {
        "id": str(gid),
        "name": name,
        "icon": None,
        "splash": None,
        "discovery_splash": None,
        "owner_id": str(owner_id),
        "afk_channel_id": None,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": roles,
        "emojis": [],
        "stickers": [],
        "features": [],
        "mfa_level": 0,
        "system_channel_id": None,
        "system_channel_flags": 0,
        "rules_channel_id": None,
        "public_updates_channel_id": None,
        "vanity_url_code": None,
        "description": None,
        "banner": None,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "nsfw_level": 0,
        "premium_progress_bar_enabled": False,
        "joined_at": now(),
        "large": False,
        "unavailable": False,
        "member_count": len(members),
        "voice_states": [],
        "members": members,
        "channels": channels,
        "threads": threads,
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    }


def message(
    mid: int,
    channel_id: int,
    author: Json,
    content: str,
    *,
    guild_id: int | None = None,
    author_member: Json | None = None,
    mentions: list[Json] = (),  # type: ignore[assignment]
    mention_roles: list[int] = (),  # type: ignore[assignment]
    attachments: list[Json] = (),  # type: ignore[assignment]
    reference: Json | None = None,
    referenced: Json | None = None,
    webhook_id: int | None = None,
    flags: int = 0,
) -> Json:
    data: Json = {
        "id": str(mid),
        "channel_id": str(channel_id),
        "author": author,
        "content": content,
        "timestamp": now(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": list(mentions),
        "mention_roles": [str(r) for r in mention_roles],
        "attachments": list(attachments),
        "embeds": [],
        "pinned": False,
        "type": 19 if reference else 0,
        "flags": flags,
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
    if author_member is not None:
        data["member"] = {k: v for k, v in author_member.items() if k != "user"}
    if reference is not None:
        data["message_reference"] = reference
        data["referenced_message"] = referenced
    if webhook_id is not None:
        data["webhook_id"] = str(webhook_id)
    return data
