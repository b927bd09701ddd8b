"""What a previous holder of the connection left, settled once connected: its unanswered
messages run again, its unsent replies sent.

When a process takes a bot's connection over (a worker died, or stopped before its turns
ended), the messages the previous holder had stored but not answered, still fresh, are left
``received`` for this client (:meth:`carrier.outbox.Outbox.recover` with ``resume``). Once
connected, the client fetches each from Discord and handles it as if it had just arrived: the
same policy, the same stored message (its id comes from Discord's), one turn, one reply. A
message Discord no longer has (deleted, or the channel is out of reach), or one the policy now
passes over, is failed with the reason, so none stays open. Replies it stored but did not send,
still fresh, are sent once (:meth:`carrier.outbox.Outbox.redeliver`), as Discord replies to the
messages they answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import discord

from carrier.errors import ClientError
from carrier.outbox import INTERRUPTED, reply_id
from carrier.types import Memory, MemoryStatus, RoomKind
from clients.discord.convert import PLATFORM
from clients.discord.sender import send_parts
from clients.discord.shards import within_shards

if TYPE_CHECKING:
    from clients.discord.client import DiscordClient

__all__ = ["LeftBehind", "resume_left"]

log = logging.getLogger(__name__)


async def resume_left(
    bot: discord.Client,
    runtime: Any,
    messages: Sequence[Memory],
    handle: Callable[[discord.Message], Awaitable[None]],
) -> int:
    """Run each left message again through ``handle`` (the client's own message handler),
    oldest first; returns how many were run. Each one still open afterwards is failed."""
    ran = 0
    for inbound in sorted(messages, key=lambda m: m.created_at):
        try:
            message = await _fetch(bot, inbound)
        except (discord.HTTPException, ValueError, TypeError) as exc:
            await _close(runtime, inbound, f"{INTERRUPTED}; Discord no longer has it ({exc})")
            continue
        await handle(message)
        ran += 1
        await _close(runtime, inbound, f"{INTERRUPTED}; not answered when run again")
    if ran:
        log.info("discord: ran %d message(s) again that a previous stop left unanswered", ran)
    return ran


async def _fetch(bot: discord.Client, inbound: Memory) -> discord.Message:
    metadata = inbound.content.metadata
    channel_id = int(metadata["discord_channel_id"])
    channel: Any = bot.get_channel(channel_id) or await bot.fetch_channel(channel_id)
    return await channel.fetch_message(int(metadata["platform_message_id"]))


async def _close(runtime: Any, inbound: Memory, why: str) -> None:
    """Fail ``inbound`` if it is still ``received`` (no turn took it: the policy passed it by)."""
    await runtime.store.set_memory_status(
        inbound.id, MemoryStatus.FAILED, error=why, expect=[MemoryStatus.RECEIVED]
    )


class LeftBehind:
    """A client's part that settles, once connected, what the previous holder left."""

    def __init__(self, client: DiscordClient) -> None:
        self.client = client
        self._messages: list[Memory] = []

    def add(self, messages: Sequence[Memory]) -> None:
        self._messages.extend(messages)

    async def settle(self) -> None:
        """Run the left messages again, then send the left replies (after each (re)connect:
        a second time finds nothing)."""
        client = self.client
        messages, self._messages = self._messages, []
        if messages:
            try:
                await resume_left(client.bot, client.runtime, messages, client._on_message)
            except Exception:
                client.stats.errors += 1
                log.exception("discord: running the messages a previous stop left failed")
        try:
            # A client running some shards of its bot sends what was left in those shards'
            # guilds only: the others' are their holders' to send.
            sharding = client.config.sharding
            where = (
                within_shards(*sharding)
                if sharding is not None and len(sharding[0]) < sharding[1]
                else None
            )
            sent = await client.runtime.outbox.redeliver(PLATFORM, self.send, where=where)
        except Exception:
            client.stats.errors += 1
            log.exception("discord: sending the replies left by a previous stop failed")
            return
        if sent:
            log.info("discord: sent %d reply(ies) a previous stop left unsent", sent)

    async def send(self, reply: Memory) -> None:
        """Send a reply whose turn ran in a process that stopped: to its room's channel, as a
        Discord reply to the message it answers (when that still exists)."""
        client = self.client
        store = client.runtime.store
        room = await store.get_room(reply.room_id)
        if room is None:
            raise ClientError(f"room {reply.room_id} is not stored; cannot find its channel")
        inbound = await store.get_memory(reply.content.in_reply_to or "")
        author = await self._author_of(inbound)
        channel_id = int(room.platform_id)
        channel: Any = client.bot.get_channel(channel_id)
        if channel is None and room.kind is RoomKind.DM and author is not None:
            channel = await client.bot.create_dm(discord.Object(id=author))  # not cached yet
        if channel is None:
            channel = await client.bot.fetch_channel(channel_id)
        if not isinstance(channel, discord.abc.Messageable):
            raise ClientError(f"Discord channel {channel_id} does not take messages")
        answered = inbound.content.metadata.get("platform_message_id") if inbound else None
        first = reply.id == reply_id(reply.content.in_reply_to or "", 0)
        reference = (
            discord.MessageReference(
                message_id=int(answered), channel_id=channel_id, fail_if_not_exists=False
            )
            if answered and first
            else None
        )
        guild = getattr(channel, "guild", None)
        sent = await send_parts(
            channel,
            reply.content.text,
            client.policy_for(guild),
            reference=reference,
            author=author,
            key=reply.id,
        )
        client._count_sent(reply, sent)

    async def _author_of(self, inbound: Memory | None) -> int | None:
        if inbound is None:
            return None
        entity = await self.client.runtime.store.get_entity(inbound.entity_id)
        return (
            int(entity.platform_id) if entity is not None and entity.platform_id.isdigit() else None
        )
