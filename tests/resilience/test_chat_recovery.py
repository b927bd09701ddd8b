"""``carrier chat`` after a chat that stopped between storing a reply and printing it: the next
chat in the same terminal prints that reply first, once; another person's terminal does not
see it. A real ``carrier chat`` subprocess on a SQLite file in a temp data dir."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from carrier.character import load_character
from carrier.memory.sqlite import SQLiteStore
from carrier.outbox import reply_id
from carrier.types import Content, Memory, MemoryStatus, stable_id
from tests.test_cli import ROOT, carrier

HARBOR = ROOT / "characters" / "harbor.yaml"


async def stopped_chat(db: Path, user: str, text: str) -> tuple[str, str]:
    """Write what a chat of ``user``'s left: a message ``pending`` and its reply, unprinted."""
    agent_id = load_character(HARBOR).agent_id
    room = stable_id(agent_id, "cli", "room", f"terminal:{user}")
    async with SQLiteStore(path=db, vector_index=False) as store:
        inbound = await store.add_memory(
            Memory(
                agent_id=agent_id,
                room_id=room,
                entity_id=stable_id(agent_id, "cli", "entity", user),
                content=Content(text="are you there?", source="cli"),
                status=MemoryStatus.PENDING,
            )
        )
        reply = await store.add_memory(
            Memory(
                id=reply_id(inbound.id, 0),
                agent_id=agent_id,
                room_id=room,
                entity_id=stable_id(agent_id, "agent"),
                content=Content(text=text, source="cli", in_reply_to=inbound.id),
                status=MemoryStatus.PENDING,
            )
        )
    return inbound.id, reply.id


async def fate(db: Path, *ids: str) -> list[MemoryStatus]:
    async with SQLiteStore(path=db, vector_index=False) as store:
        found = [await store.get_memory(i) for i in ids]
    return [m.status for m in found if m is not None]


@pytest.mark.slow
def test_chat_prints_the_reply_a_stopped_chat_left_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = data / "carrier.db"
    inbound, reply = asyncio.run(stopped_chat(db, "ana", "Ahoy, still here!"))

    other = carrier("chat", str(HARBOR), "--user", "bob", data_dir=data, stdin="", hashing=True)
    assert other.returncode == 0, other.stderr
    assert "Ahoy" not in other.stdout  # not Bob's terminal
    assert asyncio.run(fate(db, inbound, reply)) == [MemoryStatus.PENDING] * 2

    first = carrier("chat", str(HARBOR), "--user", "ana", data_dir=data, stdin="", hashing=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "Harbor: Ahoy, still here!"
    assert asyncio.run(fate(db, inbound, reply)) == [MemoryStatus.PROCESSED, MemoryStatus.SENT]

    again = carrier("chat", str(HARBOR), "--user", "ana", data_dir=data, stdin="", hashing=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == ""
