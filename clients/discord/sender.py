"""Outgoing side: safe mentions, split replies sent as Discord replies, the typing indicator."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from typing import Any

import discord

from carrier.safety.redact import current_redactor
from clients.discord.config import DiscordPolicy
from clients.discord.split import split_message
from clients.discord.text import escape_mass_mentions

__all__ = [
    "Typing",
    "allowed_mentions",
    "outgoing_parts",
    "part_nonce",
    "send_parts",
    "send_reply",
]

log = logging.getLogger(__name__)

_UNKNOWN_REFERENCE = {10008, 50035}
"""Unknown Message / Invalid Form Body: what Discord answers when a replied-to message is gone."""


def allowed_mentions(
    policy: DiscordPolicy, *, author: int | None = None
) -> discord.AllowedMentions:
    """Never @everyone, @here or roles; the replied-to author as configured; users as configured,
    which by default (``users: author``) means only ``author``, the person being answered (no
    user at all when there is none, as for the client-wide default)."""
    users = policy.allowed_mentions.users
    return discord.AllowedMentions(
        everyone=False,
        roles=False,
        users=users if isinstance(users, bool) else _only(author),
        replied_user=policy.allowed_mentions.replied_user,
    )


def _only(user_id: int | None) -> list[discord.abc.Snowflake] | bool:
    return [discord.Object(id=user_id)] if user_id is not None else False


def outgoing_parts(text: str, policy: DiscordPolicy) -> list[str]:
    """The messages a reply text becomes: secrets redacted (a last guard, whatever produced the
    text), mass mentions escaped, then split to size. Every reply and slash-command answer is
    sent in these parts."""
    text = current_redactor().clean(text, where="discord")
    return split_message(escape_mass_mentions(text), policy.max_message_length)


def part_nonce(key: str, index: int) -> int:
    """The nonce of part ``index`` of the reply ``key`` (its memory id): the same part always
    gets the same nonce, and discord.py asks Discord to enforce it, so a part sent again (after
    a crash between the send and its record) within a few minutes comes back as the message
    created the first time instead of being posted twice."""
    digest = hashlib.sha256(f"{key}\x1f{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # 63 bits: Discord takes up to 25 digits


async def send_reply(
    message: discord.Message,
    text: str,
    policy: DiscordPolicy,
    *,
    as_reply: bool = True,
    key: str | None = None,
) -> list[discord.Message]:
    """Send ``text`` to the message's channel; the first part is a Discord reply to ``message``
    (unless ``as_reply`` is false) that survives the original being deleted meanwhile. With
    ``key`` (the reply's memory id) each part carries its :func:`part_nonce`."""
    return await send_parts(
        message.channel,
        text,
        policy,
        reference=message.to_reference(fail_if_not_exists=False) if as_reply else None,
        author=message.author.id,
        key=key,
    )


async def send_parts(
    channel: discord.abc.Messageable,
    text: str,
    policy: DiscordPolicy,
    *,
    reference: discord.MessageReference | None = None,
    author: int | None = None,
    key: str | None = None,
) -> list[discord.Message]:
    """Send ``text`` to ``channel`` in its :func:`outgoing_parts`, the first as a reply to
    ``reference`` when given (sent without the link if that message is gone); ``author`` is the
    person answered (the one user it may mention). Returns the messages Discord created."""
    mentions = allowed_mentions(policy, author=author)
    sent: list[discord.Message] = []
    for index, part in enumerate(outgoing_parts(text, policy)):
        kwargs: dict[str, Any] = {"allowed_mentions": mentions}
        if key is not None:
            kwargs["nonce"] = part_nonce(key, index)
        if index == 0 and reference is not None:
            kwargs["reference"] = reference
            kwargs["mention_author"] = policy.allowed_mentions.replied_user
        try:
            sent.append(await channel.send(part, **kwargs))
        except discord.HTTPException as exc:
            if "reference" not in kwargs or exc.code not in _UNKNOWN_REFERENCE:
                raise
            log.info(
                "message %s is gone; sending the answer without a reply link",
                reference.message_id if reference is not None else None,
            )
            del kwargs["reference"], kwargs["mention_author"]
            sent.append(await channel.send(part, **kwargs))
    return sent


class Typing:
    """Shows "<bot> is typing…" in a channel between :meth:`start` and :meth:`stop`.

    Discord shows the indicator for about ten seconds, so it is renewed every ``every`` seconds.
    Failures (no permission, a closed DM) are logged and never interrupt the turn. The first
    indicator is always sent before :meth:`stop` returns, so it precedes the reply.
    """

    def __init__(self, channel: discord.abc.Messageable, *, every: float = 8.0) -> None:
        self._channel = channel
        self._every = every
        self._first: asyncio.Task[None] | None = None
        self._repeat: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self._first is not None

    def start(self) -> None:
        if self._first is not None:
            return
        self._first = asyncio.create_task(self._send())
        self._repeat = asyncio.create_task(self._renew())

    async def stop(self) -> None:
        if self._repeat is not None:
            self._repeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._repeat
        if self._first is not None:
            await self._first

    async def _send(self) -> None:
        try:
            await self._channel.typing()
        except (discord.HTTPException, OSError) as exc:
            log.debug("typing indicator failed: %s", exc)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._every)
            await self._send()
