"""Which stored memories a turn may bring up, so nothing said in private is repeated in public.

Used by recall (the state composer) and the memory tools alike.
"""

from __future__ import annotations

from carrier.memory.base import Store
from carrier.types import Memory, MemoryKind, Room, RoomKind

__all__ = ["PRIVATE_ROOMS", "Visibility"]

PRIVATE_ROOMS = frozenset({RoomKind.DM, RoomKind.API, RoomKind.CLI})
"""Rooms whose content belongs to the people in them."""
CONVERSATION_KINDS = frozenset(
    {MemoryKind.MESSAGE, MemoryKind.SUMMARY, MemoryKind.FACT, MemoryKind.REFLECTION}
)


class Visibility:
    """Memories visible in ``room`` to ``entity_id``: the agent's own, from this room, from public
    rooms, and the person's own words from their private rooms only while the conversation is
    itself private. Knowledge and posts are nobody's conversation and always visible."""

    def __init__(self, *, store: Store, agent_id: str, room: Room, entity_id: str) -> None:
        self.store = store
        self.agent_id = agent_id
        self.room = room
        self.entity_id = entity_id
        self._rooms: dict[str, Room | None] = {}

    async def allows(self, memory: Memory) -> bool:
        if memory.agent_id != self.agent_id:
            return False
        if memory.room_id == self.room.id or memory.kind not in CONVERSATION_KINDS:
            return True
        if memory.room_id not in self._rooms:
            self._rooms[memory.room_id] = await self.store.get_room(memory.room_id)
        source = self._rooms[memory.room_id]
        if source is None or source.agent_id != self.agent_id:
            return False
        if source.kind not in PRIVATE_ROOMS:
            return True
        # From a private room: only the same person's own words, and only into a private room.
        return memory.entity_id == self.entity_id and self.room.kind in PRIVATE_ROOMS

    async def filter(self, memories: list[Memory]) -> list[Memory]:
        """The memories ``allows`` keeps, in order; their rooms are read in one query."""
        unknown = [
            m.room_id
            for m in memories
            if m.room_id != self.room.id
            and m.kind in CONVERSATION_KINDS
            and m.room_id not in self._rooms
        ]
        if unknown:
            found = await self.store.get_rooms(unknown)
            self._rooms.update({room_id: found.get(room_id) for room_id in unknown})
        return [m for m in memories if await self.allows(m)]
