"""The SQLite store's full-text index of every memory gets new memories in batches: a write only
notes its row (``memories_fts_pending``); a search of that index, or ``catch_up`` (the runtime's,
after turns), indexes what is noted. Whatever happens to a memory before its batch, the index
ends up holding exactly the texts of the memories there are."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from carrier.memory import _sqlite_search
from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore
from carrier.types import Content, Memory


def _memory(text: str) -> Memory:
    return Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text=text))


def _pending(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT count(*) FROM memories_fts_pending").fetchone()[0])


def _vocabulary(path: Path) -> dict[str, int]:
    """Each word of the index of every memory, and how many memories it holds it for."""
    with closing(sqlite3.connect(path)) as db:
        return {term: int(doc) for term, doc in db.execute("SELECT term, doc FROM memories_vocab")}


async def _found(store: SQLiteStore, word: str) -> list[str]:
    hits = await store.search_hybrid(agent_id="a", text=word, embedding=[], embedding_model="m")
    return [hit.memory.content.text for hit in hits]


async def test_a_memory_is_indexed_later_and_a_search_catches_up_first(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        for text in ("the lighthouse keeper", "a lighthouse at dusk", "the ferry"):
            await store.add_memory(_memory(text))
        assert _pending(path) == 3
        assert _vocabulary(path) == {}  # the writes left the index alone
        assert sorted(await _found(store, "lighthouse")) == [
            "a lighthouse at dusk",
            "the lighthouse keeper",
        ]
        assert _pending(path) == 0
        assert _vocabulary(path)["lighthouse"] == 2
        assert await store.catch_up() == 0  # nothing left


async def test_memories_changed_before_their_batch_leave_the_index_exact(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        old = await store.add_memory(_memory("alpha"))
        assert await store.catch_up() == 1
        # Deleted while indexed; the next memory takes its row number (seq) again.
        await store.delete_memory(old.id)
        reused = await store.add_memory(_memory("kappa"))
        # Deleted before its batch.
        gone = await store.add_memory(_memory("zeta"))
        await store.delete_memory(gone.id)
        # Rewritten before its batch, and rewritten once indexed.
        early = await store.add_memory(_memory("eta"))
        early.content.text = "theta"
        await store.update_memory(early)
        assert await store.catch_up() == 2  # kappa and theta: what there is
        reused.content.text = "iota"
        await store.update_memory(reused)

        assert _vocabulary(path) == {"iota": 1, "theta": 1}
        assert await _found(store, "iota") == ["iota"]
        assert await _found(store, "theta") == ["theta"]
        for word in ("alpha", "kappa", "zeta", "eta"):
            assert await _found(store, word) == []


async def test_catch_up_indexes_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sqlite_search, "_INDEX_BATCH", 2)
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        for i in range(5):
            await store.add_memory(_memory(f"buoy number{i}"))
        assert await store.catch_up() == 5
        assert _pending(path) == 0
        assert _vocabulary(path)["buoy"] == 5


async def test_a_search_finds_what_another_process_noted(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as searcher, SQLiteStore(path=path) as writer:
        assert await _found(searcher, "harbour") == []
        await writer.add_memory(_memory("the harbour master"))
        assert await _found(searcher, "harbour") == ["the harbour master"]


async def test_a_file_whose_writes_indexed_at_once_moves_to_batches(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        await store.add_memory(_memory("the lighthouse keeper"))
        await store.catch_up()
    # Back to schema version 7, whose triggers indexed every insert at once, and one memory
    # written that way.
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("DROP TABLE memories_fts_pending")
        db.execute("DROP TRIGGER memories_fts_insert")
        db.execute(
            """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
                INSERT INTO memories_fts (rowid, text)
                VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
            END"""
        )
        db.execute("DELETE FROM schema_version WHERE version >= 8")
        db.execute(
            """INSERT INTO memories (id, agent_id, room_id, entity_id, kind, status, content,
                created_at, updated_at)
            VALUES ('m2', 'a', 'r', 'e', 'message', 'processed', '{"text": "a lighthouse"}', 1, 1)"""
        )
    async with SQLiteStore(path=path) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        assert _pending(path) == 0  # what the old triggers indexed stays indexed, once
        await store.add_memory(_memory("the lighthouse ferry"))
        assert _pending(path) == 1
        assert len(await _found(store, "lighthouse")) == 3
        assert _vocabulary(path)["lighthouse"] == 3
        # A memory indexed before the move is deleted from the index like any indexed one.
        await store.delete_memory("m2")
        assert _vocabulary(path)["lighthouse"] == 2
