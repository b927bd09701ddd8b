"""discord.py objects → Carrier's platform-neutral :class:`~carrier.types.Message`.

The runtime maps the platform ids kept here (channel, author, message) to stable room, entity
and memory ids, so the same Discord channel is the same room across restarts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

import discord

from carrier.types import Attachment, Author, Channel, Message, RoomKind
from clients.discord.text import human_size, names_in, tidy

__all__ = [
    "PLATFORM",
    "attachment_of",
    "author_of",
    "channel_of",
    "clean_text",
    "is_room_admin",
    "mentions_me",
    "replies_to_me",
    "to_message",
]

log = logging.getLogger(__name__)

PLATFORM = "discord"

_TEXT_TYPES = {
    "application/json",
    "application/xml",
    "application/yaml",
    "application/x-yaml",
    "application/toml",
    "application/javascript",
    "application/x-sh",
}
_TEXT_SUFFIXES = {
    ".txt", ".md", ".markdown", ".rst", ".py", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg",
    ".csv", ".log", ".js", ".ts", ".jsx", ".tsx", ".html", ".css", ".xml", ".sql", ".sh", ".rs",
    ".go", ".java", ".kt", ".c", ".h", ".cpp", ".hpp", ".cs", ".rb", ".php", ".lua", ".gd",
    ".glsl", ".hlsl", ".shader",
}  # fmt: skip
_READ_CEILING = 1024 * 1024
"""Text attachments larger than this are described, not downloaded."""

_THREAD_TYPES = {
    discord.ChannelType.public_thread,
    discord.ChannelType.private_thread,
    discord.ChannelType.news_thread,
}


def channel_of(channel: Any, channel_id: int) -> Channel:
    """Where a message or interaction arrived; threads keep their parent channel's id."""
    kind_type = getattr(channel, "type", None)
    if isinstance(channel, discord.DMChannel) or kind_type == discord.ChannelType.private:
        return Channel(platform_id=str(channel_id), kind=RoomKind.DM)
    if isinstance(channel, discord.Thread) or kind_type in _THREAD_TYPES:
        parent_id = getattr(channel, "parent_id", None)
        return Channel(
            platform_id=str(channel_id),
            name=getattr(channel, "name", None),
            kind=RoomKind.THREAD,
            parent_platform_id=str(parent_id) if parent_id else None,
        )
    return Channel(
        platform_id=str(channel_id), name=getattr(channel, "name", None), kind=RoomKind.GROUP
    )


def author_of(user: discord.abc.User, *, is_admin: bool = False) -> Author:
    return Author(
        platform_id=str(user.id),
        name=user.display_name,
        username=user.name,
        is_bot=bool(user.bot),
        is_admin=is_admin,
    )


def is_room_admin(permissions: discord.Permissions | None) -> bool:
    """Administrator or Manage Server where the message was written: who counts as a room admin
    for tools with ``trigger: room_admins`` (the same people who may approve drafts)."""
    return permissions is not None and (permissions.administrator or permissions.manage_guild)


def _permissions(message: discord.Message) -> discord.Permissions | None:
    """The author's permissions in the message's channel; None in a DM or for a non-member (a
    webhook), whom no tool treats as an admin."""
    author = message.author
    channel = message.channel
    if message.guild is None or not isinstance(author, discord.Member):
        return None
    if isinstance(channel, discord.abc.GuildChannel | discord.Thread):
        return channel.permissions_for(author)
    return None


def _is_my_role(role: discord.Role, me: discord.abc.User) -> bool:
    return role.tags is not None and role.tags.bot_id == me.id


def mentions_me(
    message: discord.Message, me: discord.abc.User, names: Sequence[str | None]
) -> bool:
    """Mentioned by id, by the bot's own managed role, or by name / nickname in the text."""
    if any(u.id == me.id for u in message.mentions):
        return True
    if any(_is_my_role(r, me) for r in message.role_mentions):
        return True
    nick = message.guild.me.nick if message.guild is not None and message.guild.me else None
    return names_in(message.content, [*names, me.name, getattr(me, "global_name", None), nick])


def replies_to_me(message: discord.Message, me: discord.abc.User) -> bool:
    ref = message.reference
    if ref is None or ref.message_id is None:
        return False
    resolved = ref.resolved or ref.cached_message
    return isinstance(resolved, discord.Message) and resolved.author.id == me.id


def clean_text(message: discord.Message, me: discord.abc.User) -> str:
    """The message text with the bot's own mention removed and other mentions made readable."""
    text = re.sub(rf"<@!?{me.id}>", "", message.content)
    for role in message.role_mentions:
        text = text.replace(f"<@&{role.id}>", "" if _is_my_role(role, me) else f"@{role.name}")
    for user in message.mentions:
        if user.id != me.id:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    for channel in message.channel_mentions:
        text = text.replace(f"<#{channel.id}>", f"#{channel.name}")
    return tidy(text)


def _kind(attachment: discord.Attachment) -> str:
    content_type = (attachment.content_type or "").split(";")[0].strip().lower()
    if content_type.startswith("image/"):
        return "image"
    suffix = PurePosixPath(attachment.filename).suffix.lower()
    if content_type.startswith("text/") or content_type in _TEXT_TYPES or suffix in _TEXT_SUFFIXES:
        return "text"
    return "file"


async def attachment_of(attachment: discord.Attachment, *, text_limit: int) -> Attachment:
    """Images keep their URL and get a short description; text files are read up to
    ``text_limit`` bytes; other files are described only."""
    kind = _kind(attachment)
    size = human_size(attachment.size)
    described = f"{kind} {attachment.filename} ({size})"
    out = Attachment(
        id=str(attachment.id),
        url=attachment.url,
        content_type=attachment.content_type,
        title=attachment.filename,
        size=attachment.size,
        description=described,
    )
    if kind != "text" or text_limit <= 0:
        return out
    if attachment.size > _READ_CEILING:
        out.description = described + ", too large to read"
        return out
    try:
        data = await attachment.read()
    except (discord.HTTPException, discord.NotFound, OSError) as exc:
        log.warning(
            "could not read attachment %s (%s): %s", attachment.filename, attachment.url, exc
        )
        out.description = described + ", could not be read"
        return out
    text = data[:text_limit].decode("utf-8", errors="replace")
    if len(data) > text_limit:
        text += f"\n[... truncated at {human_size(text_limit)}]"
    out.text = text
    return out


async def to_message(
    message: discord.Message,
    *,
    me: discord.abc.User,
    names: Sequence[str | None],
    text_limit: int,
) -> Message:
    """The inbound :class:`Message` for the runtime (addressing flags included)."""
    attachments = [await attachment_of(a, text_limit=text_limit) for a in message.attachments]
    ref = message.reference
    metadata: dict[str, Any] = {"discord_channel_id": str(message.channel.id)}
    if message.guild is not None:
        metadata["discord_guild_id"] = str(message.guild.id)
    return Message(
        platform=PLATFORM,
        author=author_of(message.author, is_admin=is_room_admin(_permissions(message))),
        channel=channel_of(message.channel, message.channel.id),
        text=clean_text(message, me),
        platform_message_id=str(message.id),
        attachments=attachments,
        mentions_agent=mentions_me(message, me, names),
        replies_to_agent=replies_to_me(message, me),
        in_reply_to_platform_id=str(ref.message_id) if ref and ref.message_id else None,
        metadata=metadata,
        received_at=message.created_at,
    )
