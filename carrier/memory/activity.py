"""Which rooms an agent talked in lately, read from its messages.

The Store keeps rooms by id, not by agent and time, so the rooms an operator wants first (the
ones active lately) are found from the other end: the agent's newest messages, read a page at a
time without their vectors, grouped by room. Reading stops once ``limit`` rooms are found or
``scan`` messages were read, so the cost is bounded however long the history is; a room silent
for longer than the scan reaches is listed on a later call with ``before`` (the time the scan
stopped at; a room active on both sides of that time is listed on both pages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from carrier.memory.base import Store
from carrier.types import MemoryKind

__all__ = ["RoomActivity", "RoomScan", "recent_rooms"]

PAGE = 500
_TICK = timedelta(microseconds=1)


@dataclass
class RoomActivity:
    """A room and what the scan saw of it."""

    room_id: str
    last_at: datetime
    """When its newest message was written."""
    messages: int = 0
    """Messages the scan read in it (at most all of them)."""
    speakers: dict[str, None] = field(default_factory=dict)
    """Entity ids that wrote those messages, newest first."""


@dataclass
class RoomScan:
    rooms: list[RoomActivity]
    """Most recently active first."""
    next_before: datetime | None
    """Where the scan stopped (pass as ``before`` for rooms silent since); None: it read all."""


async def recent_rooms(
    store: Store,
    *,
    agent_id: str,
    limit: int = 50,
    scan: int = 5_000,
    before: datetime | None = None,
) -> RoomScan:
    """The agent's rooms by their last message (before ``before``), newest first: at most
    ``limit``, from at most ``scan`` messages read."""
    found: dict[str, RoomActivity] = {}
    read = 0
    cursor = before
    while read < scan:
        wanted = min(PAGE, scan - read)
        page = await store.get_memories(
            agent_id=agent_id,
            kinds=[MemoryKind.MESSAGE],
            before=cursor,
            limit=wanted,
            embeddings=False,
        )
        for memory in page:
            room = found.get(memory.room_id)
            if room is None:
                if len(found) == limit:
                    # A room beyond the limit: the next call starts at this message.
                    return RoomScan(list(found.values()), memory.created_at + _TICK)
                room = found[memory.room_id] = RoomActivity(memory.room_id, memory.created_at)
            room.messages += 1
            room.speakers.setdefault(memory.entity_id)
        read += len(page)
        if len(page) < wanted:
            return RoomScan(list(found.values()), None)
        cursor = page[-1].created_at
    return RoomScan(list(found.values()), cursor)
