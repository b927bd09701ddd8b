"""The SQLite store's small writes: at once on the event loop's thread through a writing connection
of their own, a turn's writes in one transaction, and the connection's thread whenever the file is
busy with another process's write (or every so often, so that it checkpoints the log)."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from carrier.memory import _sqlite_conn as conn_module
from carrier.memory.sqlite import SQLiteStore
from carrier.types import Content, Memory, MemoryStatus

MODEL = "m:3"


def _memory(text: str, **fields: object) -> Memory:
    return Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text=text), **fields)  # type: ignore[arg-type]


async def _traced(store: SQLiteStore) -> tuple[list[str], list[str]]:
    """Statements run from now on: on the connection's thread, and by the near writer."""
    on_thread: list[str] = []
    near: list[str] = []
    await store._conn().set_trace_callback(on_thread.append)
    assert store._writer is not None
    store._writer.set_trace_callback(near.append)
    return on_thread, near


async def test_sqlite_small_writes_run_on_the_event_loops_thread(tmp_path: Path) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        on_thread, near = await _traced(store)
        message = await store.add_memory(_memory("question", status=MemoryStatus.RECEIVED))
        assert await store.set_memory_status(message.id, MemoryStatus.FAILED)
        # (received again: update_memory writes the status it is given)
        await store.update_memory(message.model_copy(update={"content": Content(text="edited")}))
        message.embedding, message.embedding_model = [1.0, 0.0, 0.0], MODEL
        record = await store.record_turn(
            message,
            MemoryStatus.PENDING,
            expect=[MemoryStatus.RECEIVED],
            replies=[_memory("answer", status=MemoryStatus.PENDING)],
            vector=True,
        )
        assert record.changed and [r.content.text for r in record.replies] == ["answer"]

        # (SQLite's trace gives a statement once per step of its triggers: the distinct ones)
        run = list(dict.fromkeys(s for s in near if not s.startswith(("--", "PRAGMA", "SELECT"))))
        writes = [s for s in run if s.startswith(("INSERT OR IGNORE INTO memories", "UPDATE"))]
        assert len(writes) == 6, run
        assert not [s for s in on_thread if "memories" in s], on_thread
        # The turn's writes are one transaction: the reply, the vector, the status.
        turn = run[run.index("BEGIN IMMEDIATE") :]
        assert len(turn) == 5 and turn[-1] == "COMMIT", turn

    # Committed to the file, as durable as any write: another connection reads them.
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT status, json_extract(content, '$.text') FROM memories").fetchall()
    assert sorted(rows) == [("pending", "answer"), ("pending", "edited")]


async def test_sqlite_a_write_the_busy_file_refuses_waits_on_the_thread(tmp_path: Path) -> None:
    """Another process holds the file's write lock: the write is not refused, nor made twice; it
    goes to the connection's thread, which waits for the lock."""
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        on_thread, near = await _traced(store)
        with closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            adding = asyncio.ensure_future(store.add_memory(_memory("while busy")))
            for _ in range(500):  # until the thread is waiting for the lock
                if [s for s in on_thread if s.startswith("INSERT")]:
                    break
                await asyncio.sleep(0.01)
            assert [s for s in near if s.startswith("INSERT")], "the near writer tried first"
            assert [s for s in on_thread if s.startswith("INSERT")], "then the thread"
            assert not adding.done()
            other.execute("COMMIT")
            stored = await asyncio.wait_for(adding, 10)
        assert stored.content.text == "while busy"
        assert await store.count_memories(agent_id="a") == 1


async def test_sqlite_a_small_write_does_not_queue_behind_the_threads_writes(
    tmp_path: Path,
) -> None:
    """A thread write waiting for its turn on the connection's thread (behind slow reads, or a
    checkpoint) holds the store's write lock; a turn's small write does not wait for it."""
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        on_thread, near = await _traced(store)
        async with store._lock:  # as a thread write holds it while it waits
            stored = await asyncio.wait_for(store.add_memory(_memory("at once")), 10)
        assert stored.content.text == "at once"
        assert [s for s in near if s.startswith("INSERT")]
        assert not [s for s in on_thread if s.startswith("INSERT")]


async def test_sqlite_a_small_write_never_lands_inside_a_threads_transaction(
    tmp_path: Path,
) -> None:
    """A thread transaction holds the file's write lock from its start: a small write meanwhile
    waits for it on the thread, and is not undone when that transaction rolls back."""

    class Undo(Exception):
        pass

    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        adding: asyncio.Future[Memory] | None = None
        try:
            async with store._transaction("a transaction that fails") as db:
                await db.execute("INSERT INTO settings (key, value) VALUES ('undone', '\"x\"')")
                adding = asyncio.ensure_future(store.add_memory(_memory("kept")))
                for _ in range(20):  # the near writer found the file busy, the thread waits
                    await asyncio.sleep(0.01)
                assert not adding.done()
                raise Undo
        except Undo:
            pass
        assert adding is not None
        stored = await asyncio.wait_for(adding, 10)
        assert (await store.get_memory(stored.id)) is not None
        assert await store.get_setting("undone") is None


async def test_sqlite_every_so_many_small_writes_one_goes_to_the_thread(tmp_path: Path) -> None:
    """The near writer never checkpoints the log; the connection's thread does, as its commits
    find it grown, and it gets one small write in every ``_THREAD_EVERY``."""
    every = conn_module._THREAD_EVERY
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        assert store._writer is not None
        assert store._writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        on_thread, near = await _traced(store)
        for i in range(2 * every):
            await store.add_memory(_memory(f"m{i}"))
        assert len({s for s in on_thread if s.startswith("INSERT")}) == 2
        assert len({s for s in near if s.startswith("INSERT")}) == 2 * every - 2
        assert await store.count_memories(agent_id="a") == 2 * every


async def test_sqlite_in_memory_store_writes_on_the_thread() -> None:
    async with SQLiteStore(path=":memory:") as store:  # no second connection there
        assert store._writer is None
        message = await store.add_memory(_memory("only", status=MemoryStatus.RECEIVED))
        record = await store.record_turn(message, MemoryStatus.PROCESSED, replies=[_memory("a")])
        assert record.changed and len(record.replies) == 1
        got = await store.get_memory(message.id)
        assert got is not None and got.status is MemoryStatus.PROCESSED
