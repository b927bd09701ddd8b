"""SQLite-specific behaviour; the shared Store contract lives in test_store_contract.py."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from carrier.errors import ConfigError, StoreError
from carrier.memory import _sqlite_schema as schema_module
from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore
from carrier.types import Content, Entity, Memory, MemoryStatus


def _memory(text: str = "hi", **fields: object) -> Memory:
    return Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text=text), **fields)  # type: ignore[arg-type]


def _tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///tmp/x/carrier.db", "/tmp/x/carrier.db"),
        ("sqlite:////tmp/x/carrier.db", "/tmp/x/carrier.db"),
        ("sqlite:///tmp/with%20space.db", "/tmp/with space.db"),
        ("sqlite:///:memory:", ":memory:"),
        ("sqlite://:memory:", ":memory:"),
    ],
)
def test_sqlite_from_url_parses_paths(url: str, expected: str) -> None:
    assert str(SQLiteStore.from_url(url).path) == expected


@pytest.mark.parametrize("url", ["mongodb://localhost/carrier", "sqlite://host/x.db", "sqlite:"])
def test_sqlite_from_url_rejects_other_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="sqlite:///"):
        SQLiteStore.from_url(url)


def test_sqlite_default_path_is_carrier_db_in_the_data_dir(tmp_path: Path) -> None:
    assert SQLiteStore.default_path(tmp_path) == tmp_path / "carrier.db"


async def test_sqlite_open_creates_parent_dirs_wal_file_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "carrier.db"
    async with SQLiteStore(path=path) as store:
        db = store._conn()
        async with db.execute("PRAGMA synchronous") as cursor:
            assert (await cursor.fetchone())[0] == 1  # type: ignore[index]  # NORMAL
        async with db.execute("PRAGMA foreign_keys") as cursor:
            assert (await cursor.fetchone())[0] == 1  # type: ignore[index]
        assert await store.schema_version() == SCHEMA_VERSION
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    expected = {"schema_version", "agents", "rooms", "entities", "participants"}
    expected |= {"room_states", "memories", "settings"}
    assert expected <= _tables(path)


async def test_sqlite_in_memory_store_works() -> None:
    async with SQLiteStore.from_url("sqlite:///:memory:") as store:
        memory = await store.add_memory(_memory())
        assert await store.get_memory(memory.id) == memory


async def test_sqlite_calls_before_open_raise_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(path=tmp_path / "carrier.db")
    with pytest.raises(StoreError, match="not open"):
        await store.get_setting("k")


async def test_sqlite_unusable_location_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="CARRIER_DATA_DIR"):
        await SQLiteStore(path=blocker / "carrier.db").open()


async def test_sqlite_not_a_database_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    path.write_bytes(b"this is not a SQLite file" * 100)
    with pytest.raises(StoreError, match=str(path)):
        await SQLiteStore(path=path).open()


async def test_sqlite_applies_new_migrations_to_an_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path):
        pass
    step = ("CREATE TABLE later (x INTEGER)", "INSERT INTO later VALUES (7)")
    monkeypatch.setattr(schema_module, "MIGRATIONS", (*schema_module.MIGRATIONS, step))
    monkeypatch.setattr(schema_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)

    async with SQLiteStore(path=path) as store:
        assert await store.schema_version() == SCHEMA_VERSION + 1
    assert "later" in _tables(path)


async def test_sqlite_logs_one_line_for_the_whole_migration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="carrier.memory.sqlite")
    path = tmp_path / "carrier.db"

    def said() -> list[str]:
        lines = [r.getMessage() for r in caplog.records if "schema version" in r.getMessage()]
        caplog.clear()
        return lines

    async with SQLiteStore(path=path):
        pass
    assert said() == [f"SQLite store {path} created at schema version {SCHEMA_VERSION}"]
    async with SQLiteStore(path=path):
        pass
    assert said() == []  # nothing to apply, nothing said
    steps = (("CREATE TABLE later (x INTEGER)",), ("CREATE TABLE later_still (x INTEGER)",))
    monkeypatch.setattr(schema_module, "MIGRATIONS", (*schema_module.MIGRATIONS, *steps))
    monkeypatch.setattr(schema_module, "SCHEMA_VERSION", SCHEMA_VERSION + 2)
    async with SQLiteStore(path=path):
        pass
    assert said() == [
        f"SQLite store {path} migrated from schema version {SCHEMA_VERSION} to {SCHEMA_VERSION + 2}"
    ]


async def test_sqlite_failed_migration_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path):
        pass
    step = ("CREATE TABLE later (x INTEGER)", "THIS IS NOT SQL")
    monkeypatch.setattr(schema_module, "MIGRATIONS", (*schema_module.MIGRATIONS, step))
    monkeypatch.setattr(schema_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)

    with pytest.raises(StoreError, match="migrating"):
        await SQLiteStore(path=path).open()
    assert "later" not in _tables(path)
    with closing(sqlite3.connect(path)) as raw:
        assert (
            raw.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        )


async def test_sqlite_naive_datetimes_are_taken_as_utc(tmp_path: Path) -> None:
    naive = datetime(2024, 1, 2, 3, 4, 5, 678901)
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        stored = await store.add_memory(_memory(created_at=naive, updated_at=naive))
        assert stored.created_at == naive.replace(tzinfo=UTC)
        page = await store.get_memories(agent_id="a", before=naive)
        assert page == []


async def test_sqlite_concurrent_writes_all_land(tmp_path: Path) -> None:
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        await asyncio.gather(*(store.add_memory(_memory(f"m{i}")) for i in range(50)))
        base: dict[str, Any] = {"id": "e1", "agent_id": "a", "platform": "cli", "platform_id": "me"}
        await asyncio.gather(
            *(store.upsert_entity(Entity(**base, names=[f"n{i}"])) for i in range(20))
        )
        assert await store.count_memories(agent_id="a") == 50
        entity = await store.get_entity("e1")
        assert entity is not None
        assert sorted(entity.names) == sorted(f"n{i}" for i in range(20))


async def test_sqlite_two_stores_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as one, SQLiteStore(path=path) as two:
        await asyncio.gather(
            *(one.add_memory(_memory(f"one{i}")) for i in range(20)),
            *(two.add_memory(_memory(f"two{i}")) for i in range(20)),
        )
        assert await one.count_memories(agent_id="a") == 40


async def test_sqlite_concurrent_open_makes_one_connection(tmp_path: Path) -> None:
    store = SQLiteStore(path=tmp_path / "carrier.db")
    await asyncio.gather(store.open(), store.open())
    connection = store._conn()
    await store.open()
    assert store._conn() is connection
    await store.close()


async def test_sqlite_turn_reads_walk_an_index_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A turn reads a room's latest messages and a person's facts. With many messages elsewhere the
    # planner must not walk every message of the agent through the kind index and filter by room.
    path = tmp_path / "carrier.db"
    from carrier.types import MemoryKind

    async with SQLiteStore(path=path) as store:
        for i in range(40):
            await store.add_memory(
                Memory(
                    agent_id="a",
                    room_id=f"r{i % 4}",
                    entity_id=f"e{i % 5}",
                    kind=MemoryKind.MESSAGE,
                    content=Content(text=f"m{i}"),
                )
            )
        await store.add_memory(
            Memory(
                agent_id="a",
                room_id="r0",
                entity_id="e1",
                kind=MemoryKind.FACT,
                content=Content(text="likes tea"),
            )
        )
        statements: list[tuple[str, Any]] = []
        fetch, fetch_near = store._fetch, store._fetch_near

        async def recording(what: str, sql: str, params: Any = ()) -> Any:
            if what == "reading memories":  # (not the change log)
                statements.append((sql, params))
            return await fetch(what, sql, params)

        async def recording_near(what: str, sql: str, params: Any = ()) -> Any:
            if what == "reading memories":
                statements.append((sql, params))
            return await fetch_near(what, sql, params)

        monkeypatch.setattr(store, "_fetch", recording)
        monkeypatch.setattr(store, "_fetch_near", recording_near)
        by_room = await store.get_memories(agent_id="a", room_id="r1", kinds=[MemoryKind.MESSAGE])
        facts = await store.get_memories(agent_id="a", entity_id="e1", kinds=[MemoryKind.FACT])
        assert {m.room_id for m in by_room} == {"r1"} and len(by_room) == 10
        assert [m.content.text for m in facts] == ["likes tea"]

    with closing(sqlite3.connect(path)) as db:
        plans = [
            " ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in statements
        ]
    assert "USING INDEX memories_room_kind" in plans[0], plans[0]
    assert "USING INDEX memories_entity_kind" in plans[1], plans[1]
    assert not any("TEMP B-TREE" in plan or plan.startswith("SCAN") for plan in plans), plans


async def test_sqlite_update_that_keeps_text_and_vector_leaves_the_indexes_alone(
    tmp_path: Path,
) -> None:
    # A message is stored, then updated with its vector (every turn); the full-text index must not
    # delete and re-insert its unchanged text, nor the change log replay an unchanged vector.
    path = tmp_path / "carrier.db"

    def counts() -> tuple[int, int]:
        with closing(sqlite3.connect(path)) as db:
            fts = db.execute("SELECT count(*) FROM memories_fts_data").fetchone()[0]
            log = db.execute("SELECT count(*) FROM memory_changes").fetchone()[0]
            return int(fts), int(log)

    async with SQLiteStore(path=path) as store:
        memory = await store.add_memory(_memory("the lighthouse keeper"))
        assert await store.catch_up() == 1  # in the full-text index from here
        before = counts()
        memory.embedding, memory.embedding_model = [1.0, 0.0], "m:2"
        await store.update_memory(memory)  # the vector is new: logged; the text is not
        fts, log = counts()
        assert (fts, log) == (before[0], before[1] + 1)
        memory.content.metadata["seen"] = True
        await store.update_memory(memory)  # same text, same vector: nothing
        assert counts() == (fts, log)
        memory.content.text = "the harbour master"
        await store.update_memory(memory)  # new text: indexed
        assert counts()[0] > fts
        hits = await store.search_hybrid(
            agent_id="a", text="harbour", embedding=[], embedding_model="m:2"
        )
        assert [h.memory.id for h in hits] == [memory.id]
        assert not await store.search_hybrid(
            agent_id="a", text="lighthouse", embedding=[], embedding_model="m:2"
        )


async def test_sqlite_get_memories_reusing_decodes_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A room's history read again: the memories unchanged since ``known`` come back as the
    same objects, undecoded; new and changed ones (another process's writes included) are read."""
    from carrier.memory import _sqlite_codec as codec

    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store, SQLiteStore(path=path) as other:
        for i in range(4):
            await store.add_memory(
                _memory(f"m{i}", created_at=datetime(2026, 1, 1, 0, i, tzinfo=UTC))
            )
        decoded: list[str] = []
        decode = codec.memory_from_row

        def counting(row: sqlite3.Row) -> Memory:
            decoded.append(row["content"])
            return decode(row)

        monkeypatch.setattr(codec, "memory_from_row", counting)

        async def read(known: dict[str, Memory]) -> list[Memory]:
            return await store.get_memories_reusing(agent_id="a", room_id="r", limit=3, known=known)

        first = await read({})
        assert len(decoded) == 3
        decoded.clear()
        again = await read({m.id: m for m in first})
        assert decoded == [] and all(a is b for a, b in zip(again, first, strict=True))

        await other.set_memory_status(first[1].id, MemoryStatus.PROCESSED)
        await other.add_memory(_memory("m4", created_at=datetime(2026, 1, 1, 0, 4, tzinfo=UTC)))
        decoded.clear()
        third = await read({m.id: m for m in again})
        assert [m.content.text for m in third] == ["m4", "m3", "m2"]
        assert len(decoded) == 2  # m4, and m2 with its new status
        assert third[1] is first[0] and third[2] is not first[1]
        assert third[2].status is MemoryStatus.PROCESSED


async def test_sqlite_a_read_that_found_nothing_is_not_made_again_till_something_is_added(
    tmp_path: Path,
) -> None:
    """A person's facts (any kind but messages): none, turn after turn, is known without a
    read until a memory of that kind is added, here or by another process, with or without a
    vector; then the next read finds it."""
    from carrier.types import MemoryKind

    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store, SQLiteStore(path=path) as other:
        reads: list[str] = []
        fetch_near = store._fetch_near

        async def counted(what: str, sql: str, params: Any = ()) -> list[sqlite3.Row]:
            if what == "reading memories":
                reads.append(sql)
            return await fetch_near(what, sql, params)

        store._fetch_near = counted  # type: ignore[method-assign]

        async def facts(entity: str = "e") -> list[str]:
            found = await store.get_memories(
                agent_id="a", entity_id=entity, kinds=[MemoryKind.FACT], limit=20
            )
            return [m.content.text for m in found]

        assert await facts() == [] and await facts() == []
        assert len(reads) == 1  # the second asked nothing
        await store.add_memory(_memory("a message", kind=MemoryKind.MESSAGE))
        assert await facts() == [] and len(reads) == 1  # messages are no facts

        # Added by another process, without a vector.
        await other.add_memory(_memory("likes tea", kind=MemoryKind.FACT))
        assert await facts() == ["likes tea"]
        assert await facts("e2") == [] and await facts("e2") == []
        reads.clear()
        # Added here, with a vector, about someone else: read again, and found.
        await store.add_memory(
            _memory("plays chess", kind=MemoryKind.FACT).model_copy(
                update={"entity_id": "e2", "embedding": [1.0, 0.0], "embedding_model": "m"}
            )
        )
        assert await facts("e2") == ["plays chess"] and len(reads) == 1

    # Without the vector index (which follows the change log), every read is made.
    async with SQLiteStore(path=path, vector_index=False) as plain:
        assert await plain.get_memories(agent_id="a", entity_id="e3", kinds=[MemoryKind.FACT]) == []
        await other_write(path)
        found = await plain.get_memories(agent_id="a", entity_id="e3", kinds=[MemoryKind.FACT])
        assert [m.content.text for m in found] == ["hums"]


async def other_write(path: Path) -> None:
    from carrier.types import MemoryKind

    async with SQLiteStore(path=path) as other:
        await other.add_memory(
            _memory("hums", kind=MemoryKind.FACT).model_copy(update={"entity_id": "e3"})
        )
