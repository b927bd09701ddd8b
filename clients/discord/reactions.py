"""Reactions to the bot's messages, stored as memories (so the persona can learn what landed).

A reaction is a ``message`` memory in the channel's room, from the reacting person, with
``content.metadata["reaction"]`` set to the emoji and ``in_reply_to`` pointing at the bot's reply
memory when it is known. Ids follow :mod:`carrier.pipeline.message` exactly
(``stable_id(agent_id, "discord", "room" | "entity", platform_id)``), and the memory id is derived
from the message, the user and the emoji, so a redelivered reaction is stored once.
"""

from __future__ import annotations

from typing import Any

from carrier.types import Content, Memory, MemoryKind, MemoryStatus, stable_id

__all__ = ["entity_id", "room_id", "store_reaction"]

PLATFORM = "discord"


def room_id(agent_id: str, channel_id: int | str) -> str:
    return stable_id(agent_id, PLATFORM, "room", str(channel_id))


def entity_id(agent_id: str, user_id: int | str) -> str:
    return stable_id(agent_id, PLATFORM, "entity", str(user_id))


async def store_reaction(
    runtime: Any,
    *,
    channel_id: int,
    message_id: int,
    user_id: int,
    user_name: str,
    emoji: str,
    reply_memory_id: str | None = None,
) -> Memory:
    """Record that ``user_name`` reacted with ``emoji`` to the bot's message ``message_id``."""
    agent_id: str = runtime.agent_id
    memory = Memory(
        id=stable_id(agent_id, PLATFORM, "reaction", str(message_id), str(user_id), emoji),
        agent_id=agent_id,
        room_id=room_id(agent_id, channel_id),
        entity_id=entity_id(agent_id, user_id),
        kind=MemoryKind.MESSAGE,
        content=Content(
            text=f"{user_name} reacted {emoji} to {runtime.character.name}'s message",
            source=PLATFORM,
            in_reply_to=reply_memory_id,
            metadata={
                "reaction": emoji,
                "speaker": user_name,
                "platform_message_id": str(message_id),
            },
        ),
        status=MemoryStatus.STORED,
    )
    stored: Memory = await runtime.store.add_memory(memory)
    return stored
