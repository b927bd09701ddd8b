"""SQLiteStore: the embedded default Store. One file, no server.

The store is assembled from parts, each a module of its own beside this one:

* :mod:`~carrier.memory._sqlite_conn`: one aiosqlite connection (one worker thread) serves the
  writes and reads that may take a while; an asyncio lock keeps each write, and each
  multi-statement transaction, whole, so writes never run at the same time; SQLite's errors
  become ``StoreError``. The small reads of a turn (a room's latest messages, a person's facts,
  rooms, search hits) run at once on the event loop's thread through a read-only connection, and
  its small writes (a memory by id, :meth:`~SQLiteStore.record_turn`) through a writing
  connection of their own, under the same lock: a hand-off to the worker thread costs more than
  they do.
* :mod:`~carrier.memory._sqlite_schema`: the migrations a file gets when it opens.
* :mod:`~carrier.memory._sqlite_records` and :mod:`~carrier.memory._sqlite_memories`: the Store's
  reads and writes, laid out as rows by :mod:`~carrier.memory._sqlite_codec`.
* :mod:`~carrier.memory._sqlite_changes`: recall runs in process, over an agent's vectors held in
  memory (:class:`~carrier.memory.index.VectorIndex`: exact, or ANN for large sets, its index
  saved beside the file as ``<file>.vectors/``). The index stays in step through a change log
  that triggers write (``memory_changes``): before each search the store applies the entries it
  has not seen, so it sees its own writes and other processes' alike.
* :mod:`~carrier.memory._sqlite_search`: until an agent's vectors are loaded, a search scores the
  matching vectors read from the file. Full-text search uses FTS5 tables: knowledge's, which
  triggers keep in step, and every memory's, which gets new memories in batches (a write only
  notes its row; a search, or the runtime after turns, indexes what is noted:
  :meth:`SQLiteStore.catch_up`); :meth:`SQLiteStore.search_hybrid` fuses both rankings.

Rows reference each other by id only (rooms, entities and memories name their agent, but no
foreign key is declared): the store behaves like the MongoDB one, where a memory may be written
before its room, and :meth:`SQLiteStore.delete_agent` removes what an agent owns explicitly.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from carrier.errors import ConfigError
from carrier.memory._sqlite_memories import Memories
from carrier.memory._sqlite_records import Records
from carrier.memory._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from carrier.memory._sqlite_search import SQLiteSearch
from carrier.memory.base import Store

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]


class SQLiteStore(Records, Memories, SQLiteSearch, Store):
    """The Store in one SQLite file (WAL mode), or in memory with ``path=":memory:"``.

    Usage::

        async with SQLiteStore(path=SQLiteStore.default_path(settings.data_dir)) as store:
            ...
    """

    def __init__(self, *, path: str | Path, vector_index: bool = True) -> None:
        super().__init__(path=path, vector_index=vector_index)

    def __repr__(self) -> str:
        return f"SQLiteStore(path={str(self.path)!r})"

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """A store from ``sqlite:///absolute/path.db`` (or ``sqlite:///:memory:``)."""
        parts = urlsplit(url)
        if parts.scheme == "sqlite" and parts.netloc == ":memory:" and not parts.path:
            return cls(path=":memory:")
        if parts.scheme != "sqlite" or parts.netloc or not parts.path:
            raise ConfigError(
                f"not a SQLite URL: {url!r}; expected sqlite:///absolute/path/carrier.db"
            )
        path = unquote(parts.path)
        if path.lstrip("/") == ":memory:":
            return cls(path=":memory:")
        return cls(path="/" + path.lstrip("/"))

    @staticmethod
    def default_path(data_dir: str | Path) -> Path:
        """Where the embedded store lives inside a data dir: ``<data_dir>/carrier.db``."""
        return Path(data_dir).expanduser() / "carrier.db"

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        async with self._lock:  # two concurrent open() calls make one connection
            if self._db is None:
                db = self._db = await self._connect()
                try:
                    await self._start_watch(db)
                except BaseException:
                    self._db = None
                    await db.close()  # its thread would keep the process from exiting
                    raise
                self._open_writer()

    async def close(self) -> None:
        await self._stop_watch()
        db, self._db = self._db, None
        if db is not None:
            async with self._lock:  # let a running write finish
                self._close_writer()
                await db.close()

    async def schema_version(self) -> int:
        """The schema version recorded in the database."""
        rows = await self._fetch(
            "reading the schema version", "SELECT MAX(version) FROM schema_version"
        )
        return int(rows[0][0] or 0)
