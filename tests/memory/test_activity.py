"""An agent's rooms by last activity (:func:`carrier.memory.activity.recent_rooms`), on every
store: newest first, its speakers, bounded by ``limit`` and ``scan``, continued with the cursor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carrier.memory.activity import recent_rooms
from carrier.memory.base import Store
from carrier.types import Content, Memory, MemoryKind

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


async def said(store: Store, room: str, who: str, minute: int, agent: str = "a1") -> None:
    await store.add_memory(
        Memory(
            agent_id=agent,
            room_id=room,
            entity_id=who,
            content=Content(text=f"{who} in {room}"),
            created_at=T0 + timedelta(minutes=minute),
        )
    )


async def test_activity_rooms_newest_first_with_speakers(store: Store) -> None:
    await said(store, "r-old", "ana", 0)
    await said(store, "r-new", "bo", 1)
    await said(store, "r-old", "cy", 2)
    await said(store, "r-mid", "ana", 3)
    await said(store, "r-new", "bo", 4)
    await said(store, "r-else", "dee", 9, agent="a2")  # another agent's
    # Not a message: no activity.
    await store.add_memory(
        Memory(agent_id="a1", room_id="r-fact", entity_id="ana", kind=MemoryKind.FACT)
    )

    scan = await recent_rooms(store, agent_id="a1")

    assert [(r.room_id, r.messages, list(r.speakers)) for r in scan.rooms] == [
        ("r-new", 2, ["bo"]),
        ("r-mid", 1, ["ana"]),
        ("r-old", 2, ["cy", "ana"]),
    ]
    assert scan.rooms[0].last_at == T0 + timedelta(minutes=4)
    assert scan.next_before is None


async def test_activity_rooms_limit_and_scan_leave_a_cursor(store: Store) -> None:
    for minute, room in enumerate(["r1", "r2", "r3", "r3", "r4"]):
        await said(store, room, "ana", minute)

    first = await recent_rooms(store, agent_id="a1", limit=2)
    assert [r.room_id for r in first.rooms] == ["r4", "r3"]
    assert first.next_before is not None
    rest = await recent_rooms(store, agent_id="a1", limit=2, before=first.next_before)
    assert [r.room_id for r in rest.rooms] == ["r2", "r1"]

    # Reading at most two messages: the rooms they show, and where to go on.
    bounded = await recent_rooms(store, agent_id="a1", scan=2)
    assert [r.room_id for r in bounded.rooms] == ["r4", "r3"]
    assert bounded.next_before == T0 + timedelta(minutes=3)
    assert await recent_rooms(store, agent_id="nobody") == type(first)([], None)
