"""SQLite recall machinery: the schema 2 migration, FTS5, the change log that keeps the in-memory
vector index of every process in step, and the saved ANN index beside the database file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from carrier.memory.sqlite import MIGRATIONS, SQLiteStore
from carrier.types import Content, Memory

MODEL = "m:8"


def _memory(text: str, vector: np.ndarray | list[float] | None = None, **fields: object) -> Memory:
    embedding = None if vector is None else [float(x) for x in vector]
    return Memory(
        agent_id="a",
        room_id="r",
        entity_id="e",
        content=Content(text=text),
        embedding=embedding,
        embedding_model=MODEL if embedding is not None else None,
        **fields,  # type: ignore[arg-type]
    )


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=8)
    return v / np.linalg.norm(v)


async def _top(store: SQLiteStore, vector: np.ndarray, k: int = 1) -> list[str]:
    hits = await store.search_memories(
        agent_id="a", embedding=vector.tolist(), embedding_model=MODEL, k=k
    )
    return [h.memory.content.text for h in hits]


async def test_sqlite_migrates_a_version_1_database(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        for statement in MIGRATIONS[0]:
            db.execute(statement)
        db.execute("INSERT INTO schema_version VALUES (1, 'test')")
        for i, text in enumerate(["the walrus sings", "a quiet harbour", "the walrus again"]):
            db.execute(
                "INSERT INTO memories VALUES (?, 'a', 'r', 'e', 'message', 'stored', ?, ?, ?, "
                "NULL, 1000, 1000)",
                (
                    f"id{i}",
                    Content(text=text).model_dump_json(),
                    _unit(i).astype("<f4").tobytes(),
                    MODEL,
                ),
            )

    async with SQLiteStore(path=path) as store:
        assert await store.schema_version() == len(MIGRATIONS)
        # Equal created_at: insertion order (the old rowid, now seq) still breaks the tie.
        newest = await store.get_memories(agent_id="a")
        assert [m.id for m in newest] == ["id2", "id1", "id0"]
        hits = await store.search_hybrid(
            agent_id="a", text="walrus", embedding=_unit(1).tolist(), embedding_model=MODEL, k=3
        )
        # Found by text and by vector, the walrus notes beat the best vector match alone.
        assert {h.memory.id for h in hits[:2]} == {"id0", "id2"}
        assert await _top(store, _unit(1)) == ["a quiet harbour"]
        assert store.vectors is not None and store.vectors.loaded("a", MODEL, 8)


@pytest.mark.parametrize("joined", [256, 2], ids=["one-read", "ids-first"])
async def test_sqlite_index_follows_another_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, joined: int
) -> None:
    from carrier.memory import _sqlite_changes

    # A few changes come with their rows in one read; more than _JOINED, ids first.
    monkeypatch.setattr(_sqlite_changes, "_JOINED", joined)
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as mine, SQLiteStore(path=path) as theirs:
        kept = await mine.add_memory(_memory("kept", _unit(1)))
        doomed = await mine.add_memory(_memory("doomed", _unit(2)))
        assert await _top(mine, _unit(2)) == ["doomed"]  # loads mine's index

        await theirs.add_memory(_memory("theirs", _unit(3)))
        assert await theirs.delete_memory(doomed.id)
        await theirs.update_memory(kept.model_copy(update={"embedding": _unit(4).tolist()}))

        statements: list[str] = []
        await mine._conn().set_trace_callback(statements.append)
        _trace_near(mine, statements)
        assert await _top(mine, _unit(3)) == ["theirs"]
        read = [s for s in statements if "memory_changes" in s]
        assert len(read) == (1 if joined > 3 else 2), read
        assert "doomed" not in await _top(mine, _unit(2), k=10)
        top = await mine.search_memories(
            agent_id="a", embedding=_unit(4).tolist(), embedding_model=MODEL, k=1
        )
        assert top[0].memory.content.text == "kept" and top[0].score == pytest.approx(1.0)


async def test_sqlite_search_reads_the_change_log_only_after_a_commit(tmp_path: Path) -> None:
    """A search checks the database's data version (no statement on the store's connection)
    and reads the change log only when some connection committed since it last did."""
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as mine, SQLiteStore(path=path) as theirs:
        await mine.add_memory(_memory("first", _unit(1)))
        assert await _top(mine, _unit(1)) == ["first"]  # loads mine's index
        statements: list[str] = []
        await mine._conn().set_trace_callback(statements.append)
        _trace_near(mine, statements)

        assert await _top(mine, _unit(1)) == ["first"]
        assert not [s for s in statements if "memory_changes" in s]

        await theirs.add_memory(_memory("theirs", _unit(2)))
        assert await _top(mine, _unit(2)) == ["theirs"]
        assert [s for s in statements if "memory_changes" in s]

        statements.clear()
        await mine.add_memory(_memory("mine", _unit(3)))  # its own commits count too
        assert await _top(mine, _unit(3)) == ["mine"]
        assert [s for s in statements if "memory_changes" in s]


async def test_sqlite_store_at_a_relative_path_watches_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with SQLiteStore(path="data/carrier.db") as mine:
        async with SQLiteStore(path=tmp_path / "data" / "carrier.db") as theirs:
            await mine.add_memory(_memory("first", _unit(1)))
            assert await _top(mine, _unit(1)) == ["first"]
            await theirs.add_memory(_memory("theirs", _unit(2)))
            assert await _top(mine, _unit(2)) == ["theirs"]
        assert mine._data_version() is not None


async def test_sqlite_index_reloads_when_the_change_log_was_pruned_past_it(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as mine, SQLiteStore(path=path) as theirs:
        await mine.add_memory(_memory("first", _unit(1)))
        assert await _top(mine, _unit(1)) == ["first"]
        for i in range(3):
            await theirs.add_memory(_memory(f"new {i}", _unit(10 + i)))
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("DELETE FROM memory_changes WHERE n < (SELECT max(n) FROM memory_changes)")
        assert await _top(mine, _unit(10)) == ["new 0"]


async def test_sqlite_saves_the_ann_index_beside_the_database(tmp_path: Path) -> None:
    pytest.importorskip("usearch", reason="usearch is not installed: make install-dev")
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        assert store.vectors is not None
        store.vectors.ann_rows = store.vectors.persist_rows = 50
        for i in range(120):
            await store.add_memory(_memory(f"note {i}", _unit(i)))
        await store.prepare_search(agent_id="a", embedding_model=MODEL, dim=8)
        assert store.vectors.ann_ready("a", MODEL, 8)
        assert await _top(store, _unit(77)) == ["note 77"]
    [saved] = (path.with_name("carrier.db.vectors") / "m_8-8" / "a").glob("*.rows.npz")

    async with SQLiteStore(path=path) as store:
        assert store.vectors is not None
        store.vectors.ann_rows = store.vectors.persist_rows = 50
        await store.prepare_search(agent_id="a", embedding_model=MODEL, dim=8)
        assert await _top(store, _unit(5)) == ["note 5"]
        assert store.vectors.ann_ready("a", MODEL, 8)
        assert await store.delete_agent("a") is False
    assert not saved.parent.exists()


async def test_sqlite_text_search_survives_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        await store.add_memory(_memory("the narwhal", _unit(99)))
        for i in range(20):
            await store.add_memory(_memory(f"filler {i}", _unit(i)))
        for m in await store.get_memories(agent_id="a", limit=10):  # the newest fillers
            await store.delete_memory(m.id)
    with closing(sqlite3.connect(path)) as db:
        db.execute("VACUUM")
    async with SQLiteStore(path=path) as store:
        hits = await store.search_hybrid(
            agent_id="a", text="narwhal", embedding=_unit(500).tolist(), embedding_model=MODEL, k=1
        )
        assert [h.memory.content.text for h in hits] == ["the narwhal"]


async def test_sqlite_open_that_fails_half_way_closes_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(path=tmp_path / "carrier.db")

    def broken(self: SQLiteStore) -> None:
        raise RuntimeError("no watch")

    monkeypatch.setattr(SQLiteStore, "_open_watch", broken)
    with pytest.raises(RuntimeError, match="no watch"):
        await store.open()
    assert store._db is None  # closed: its thread does not outlive the failure
    monkeypatch.undo()
    async with store:
        await store.add_memory(_memory("after", _unit(1)))
        assert await _top(store, _unit(1)) == ["after"]


def _trace_near(store: SQLiteStore, statements: list[str]) -> None:
    """Record what the store's connections on the event loop's thread run."""
    assert store._writer is not None and store._reader is not None
    store._writer.set_trace_callback(statements.append)
    store._reader.set_trace_callback(statements.append)


async def test_sqlite_small_reads_skip_the_connections_thread(tmp_path: Path) -> None:
    """A turn's reads (a room's history, a person's facts, rooms, search hits) run at once on
    the event loop's thread through the near writer (whose page cache the turn's own writes
    leave warm), see the store's own writes; without a near writer, through the read-only
    connection; and on the connection's thread when neither can serve them."""
    from carrier.types import Room

    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        on_thread: list[str] = []
        await store._conn().set_trace_callback(on_thread.append)
        room = Room(id="r", agent_id="a", platform="p", platform_id="1")
        await store.upsert_room(room)
        first = await store.add_memory(_memory("first", _unit(1)))
        assert await _top(store, _unit(1)) == ["first"]  # loads the vector index (the thread)
        on_thread.clear()

        async def reads() -> None:
            assert [m.id for m in await store.get_memories(agent_id="a", room_id="r")] == [first.id]
            assert [m.id for m in await store.get_memories(agent_id="a", entity_id="e")] == [
                first.id
            ]
            assert (await store.get_rooms(["r"]))["r"] == room
            assert await store.get_room("r") == room
            assert (await store.get_memory(first.id)) == first
            assert await _top(store, _unit(1)) == ["first"]

        def selects(statements: list[str]) -> list[str]:
            return [s for s in statements if s.lstrip().upper().startswith("SELECT")]

        assert store._writer is not None and store._reader is not None
        by_writer: list[str] = []
        by_reader: list[str] = []
        store._writer.set_trace_callback(by_writer.append)
        store._reader.set_trace_callback(by_reader.append)
        await reads()
        assert not selects(on_thread), on_thread
        assert [s for s in by_writer if "FROM memories" in s] and not selects(by_reader)

        writer, store._writer = store._writer, None  # as when it could not be opened
        try:
            by_writer.clear()
            await reads()
            assert not selects(on_thread) and not by_writer
            assert [s for s in by_reader if "FROM memories" in s]

            store._reader.close()  # it fails now: the thread reads instead
            await reads()
            assert [s for s in on_thread if "FROM memories" in s]
        finally:
            store._writer = writer

    async with SQLiteStore(path=":memory:") as memory_store:  # no second connection there
        assert memory_store._reader is None
        await memory_store.add_memory(_memory("only", _unit(1)))
        assert [
            m.content.text for m in await memory_store.get_memories(agent_id="a", room_id="r")
        ] == ["only"]
