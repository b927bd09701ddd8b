"""The SQLite store's connection: opening the file, running statements, SQLite errors as StoreError.

One aiosqlite connection (one worker thread) serves every write and every read that may take a
while; an asyncio lock keeps each write, and each multi-statement transaction, whole, so writes
never run at the same time. A turn's small writes run on the event loop's thread instead,
through a writing connection of their own (:meth:`SQLiteConnection._write_near`), kept apart from
the thread's writes by SQLite's own lock on the file: a hand-off to the worker thread and back
costs more than such a statement. So do small reads found through an index
(:meth:`SQLiteConnection._fetch_near`), through that same connection, whose page cache its own
writes leave warm.
Every failure of SQLite becomes a :class:`~carrier.errors.StoreError` that names the file and
what was being done.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from carrier.errors import StoreError
from carrier.memory._sqlite_schema import migrate

__all__ = ["BUSY_TIMEOUT_S", "SQLiteConnection"]

T = TypeVar("T")

BUSY_TIMEOUT_S = 10.0
"""How long a statement waits for another process's write lock before failing."""
_NEAR_TRIES = 5
_NEAR_RETRY_S = 0.002
"""A small write the file's lock refuses is tried again this many times, this long apart, before
it goes to the connection's thread."""
_THREAD_EVERY = 64
"""Every this many writes the near writer would make, one goes to the connection's thread
instead: that connection checkpoints the log as its commits find it grown (the near writer never
does: a checkpoint copies pages and syncs the file, not a thing for the event loop's thread)."""


class SQLiteConnection:
    """The connection to one SQLite file (or ``":memory:"``) and the statements run over it; the
    base of :class:`~carrier.memory.sqlite.SQLiteStore` and of the parts it is made of."""

    def __init__(self, *, path: str | Path) -> None:
        self.path = path if str(path) == ":memory:" else Path(path).expanduser()
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        """Held by each write and transaction, and by open and close."""
        self._reader: sqlite3.Connection | None = None
        """A read-only connection to the same file, used on the event loop's thread for the
        small reads of :meth:`_fetch_near` where there is no near writer (both None: every read
        goes to the connection's thread)."""
        self._writer: sqlite3.Connection | None = None
        """A writing connection to the same file, used on the event loop's thread for the small
        writes of :meth:`_write_near` and the small reads of :meth:`_fetch_near` (None: every
        write goes to the connection's thread)."""
        self._near_writes = 0

    async def _connect(self) -> aiosqlite.Connection:
        """A new connection, configured, to a file brought to the current schema."""
        if isinstance(self.path, Path):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the directory of the SQLite store {self.path}: {exc}; "
                    "set CARRIER_DATA_DIR to a writable directory"
                ) from exc
        with self._errors("opening"):
            db = await aiosqlite.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            with self._errors("configuring"):
                await db.execute("PRAGMA journal_mode = WAL")
                await db.execute("PRAGMA synchronous = NORMAL")
                await db.execute("PRAGMA foreign_keys = ON")
                await db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            with self._errors("migrating the schema"):
                await migrate(db, self.path)
        except BaseException:
            await db.close()
            raise
        return db

    def _open_writer(self) -> None:
        """Open the near writer (:meth:`_write_near`); without it, every write goes to the
        connection's thread. Called by ``open()`` once the file is at the current schema."""
        if not isinstance(self.path, Path):
            return  # an in-memory database is the one connection's alone
        try:
            # No busy wait: a write that cannot take the file's write lock at once (another
            # process holds it) goes to the connection's thread, which waits for it.
            writer = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
            writer.row_factory = sqlite3.Row
            writer.execute("PRAGMA synchronous = NORMAL")  # as durable as the thread's
            writer.execute("PRAGMA foreign_keys = ON")
            writer.execute("PRAGMA wal_autocheckpoint = 0")  # see _THREAD_EVERY
        except sqlite3.Error:
            return
        self._writer = writer

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite store {self.path}: {what} failed: {exc}") from exc

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError(
                f"SQLite store {self.path} is not open; use `async with SQLiteStore(...)` "
                "or await store.open() first"
            )
        return self._db

    async def _fetch(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        db = self._conn()
        with self._errors(what):
            # One trip to the connection's thread (execute, fetch and close are three).
            return list(await db.execute_fetchall(sql, params))

    async def _fetch_near(
        self, what: str, sql: str, params: Sequence[Any] = ()
    ) -> list[sqlite3.Row]:
        """A small read (a few rows found through an index) run at once on the event loop's
        thread: a hand-off to the connection's thread and back costs more than such a read
        (0.2-0.6 ms in a turn, several ms on a loaded machine, against ~0.05 ms). What this
        store wrote is committed by then, so it sees its own writes.

        It goes through the near writer (autocommit: a read holds nothing once its rows are
        fetched). A connection drops its whole page cache when it finds that another one
        committed, and a turn's reads come right after the turn's own near write: through the
        writer they find the pages in its cache, where the read-only connection read every
        page again. Without a near writer the read-only connection reads; where there is
        neither (``:memory:``), or the read fails (busy, say), the read goes to the connection's
        thread as any other."""
        reader = self._writer or self._reader
        if reader is not None:
            try:
                return reader.execute(sql, params).fetchall()
            except sqlite3.Error:
                pass  # the connection's thread reads it, or raises the StoreError that says why
        return await self._fetch(what, sql, params)

    async def _fetch_one(
        self, what: str, sql: str, params: Sequence[Any] = ()
    ) -> sqlite3.Row | None:
        rows = await self._fetch(what, sql, params)
        return rows[0] if rows else None

    async def _write(self, what: str, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one write statement; returns the number of rows it changed."""
        db = self._conn()
        async with self._lock:
            with self._errors(what):
                # The statement has run once execute returns; the count is read from the
                # finished cursor, which is dropped without a second trip to close it.
                return (await db.execute(sql, params)).rowcount

    async def _write_near(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the write ``fn(connection)`` at once on the event loop's thread, through the near
        writer: a turn's few rows by id (0.1-0.2 ms of SQLite's work, where a hand-off to the
        connection's thread and back costs 0.3-0.6 ms on a quiet machine and several on a loaded
        one). It is as durable as a write on the thread (the same file, the same ``synchronous``).
        It does not wait for the store's write lock: it is one synchronous step on the event
        loop's thread, so no other near write can interleave with it, and SQLite's own lock keeps
        it out of the thread's writes (a thread transaction holds the file's write lock from its
        ``BEGIN IMMEDIATE``; the near writer never waits for that lock). Waiting for the store's
        lock made a turn's small writes queue behind a thread write that was itself queued behind
        the thread's reads, or checkpointing: 30 ms on average and up to 0.9 s at 200
        conversations (``bench/throughput.py``). ``fn`` is one statement, or one transaction of
        several (:func:`carrier._sqlite_thread.immediate`), so that a write refused at its start
        (the file's lock held by a thread write, or by another process) has done nothing; it is
        tried again a few times, milliseconds apart (:data:`_NEAR_TRIES`), then goes to the
        connection's thread whole, under the store's write lock like any thread write; so does
        every :data:`_THREAD_EVERY`-th, and every write where there is no near writer
        (``:memory:``)."""
        self._conn()  # (raises if the store is not open)
        self._near_writes += 1
        if self._near_writes % _THREAD_EVERY:
            for attempt in range(_NEAR_TRIES):
                writer = self._writer  # (closed meanwhile: None)
                if writer is None:
                    break
                try:
                    return fn(writer)
                except sqlite3.Error as exc:
                    if not _busy(exc):
                        with self._errors(what):
                            raise
                if attempt + 1 < _NEAR_TRIES:
                    # The file's lock is mostly held for one short thread write: try again soon
                    # rather than queue on the thread behind its reads (0.2 s at 200
                    # conversations); a longer hold (a transaction, another process) goes there.
                    await asyncio.sleep(_NEAR_RETRY_S)
        return await self._write_thread(what, fn)

    async def _write_thread(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the write ``fn(connection)`` on the connection's thread, under the store's write
        lock (one statement, or one transaction of several)."""
        db = self._conn()
        async with self._lock:
            with self._errors(what):
                # aiosqlite queues a function to its thread with ``_execute`` (what its own
                # execute() does with a statement); the raw connection is used there only.
                result: T = await db._execute(fn, db._conn)
                return result

    @asynccontextmanager
    async def _transaction(self, what: str) -> AsyncIterator[aiosqlite.Connection]:
        db = self._conn()
        async with self._lock:
            with self._errors(what):
                await db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    if db.in_transaction:  # SQLite rolls back by itself after some errors
                        await db.execute("ROLLBACK")
                    raise
                await db.execute("COMMIT")


def _busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds the lock (nothing was done)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
