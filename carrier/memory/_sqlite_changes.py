"""The SQLite store's vector index kept in step with the file, through its change log.

The in-memory :class:`~carrier.memory.index.VectorIndex` loads an agent's vectors from the file
in pages, then learns of every later change from ``memory_changes``, a log that triggers write
(see :mod:`carrier.memory._sqlite_schema`) for this process's writes and other processes' alike.
Before each search the store applies the entries it has not seen; it reads the log only when
``PRAGMA data_version`` on a read-only connection of its own says some connection committed
since (a few microseconds on the event loop's thread, no hand-off to the connection's thread).
A process too far behind (the log pruned past it, or too many changes to replay) reloads the
agents concerned instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from carrier.memory import _sqlite_codec as codec
from carrier.memory._sqlite_conn import SQLiteConnection
from carrier.memory.index import Shard, VectorIndex, VectorRows

__all__ = ["ChangeWatch"]

logger = logging.getLogger("carrier.memory.sqlite")

_LOAD_PAGE = 10_000
"""Vectors read per statement while loading the index."""
_SYNC_LIMIT = 20_000
"""More pending changes than this and the index reloads instead of replaying them."""
_JOINED = 256
"""Up to this many pending changes are read with their rows in one statement."""
_CHANGED_COLUMNS = (
    "m.seq, m.id, m.room_id, m.entity_id, m.kind, m.created_at, m.embedding, m.embedding_model, "
    "m.agent_id"
)
"""What applying a change reads of its memory (the order :func:`codec.vector_rows` expects)."""
_KEEP_CHANGES = 100_000
_PRUNE_EVERY = 10_000
"""The change log keeps the last ``_KEEP_CHANGES`` entries (a process further behind reloads),
pruned about every ``_PRUNE_EVERY`` changes."""


class ChangeWatch(SQLiteConnection):
    """The store's vector index, its loads from the file and the change log that keeps it in
    step (a part of :class:`~carrier.memory.sqlite.SQLiteStore`)."""

    def __init__(self, *, path: str | Path, vector_index: bool = True) -> None:
        super().__init__(path=path)
        self._sync_lock = asyncio.Lock()
        self._cursor = 0
        """The last ``memory_changes`` entry applied to the vector index."""
        self._watch: sqlite3.Connection | None = None
        """A read-only connection used on the event loop's thread for ``PRAGMA data_version`` (a
        few microseconds, no hand-off to the connection's thread: see :meth:`_data_version`),
        and as the store's reader for small reads (``_fetch_near``) where there is no near
        writer."""
        self._synced_version: int | None = None
        """The data version seen when the change log was last read in full."""
        self._epochs: Counter[str] = Counter()
        """How many times the change log was seen to change memories of each kind (``?``: a
        memory gone, whose kind it no longer says; ``*``: any kind, the log being too long to
        look at, or unread while the store was closed). See :meth:`_kinds_version`."""
        self.vectors: VectorIndex | None = None
        """The in-memory vector index searches use (None: ``vector_index=False``, every search
        reads its candidates from the database)."""
        if vector_index:
            directory = None
            if isinstance(self.path, Path):
                directory = self.path.with_name(self.path.name + ".vectors")
            self.vectors = VectorIndex(
                load=self._load_vectors, count=self._count_vectors, directory=directory
            )

    async def _start_watch(self, db: aiosqlite.Connection) -> None:
        """Start where the change log ends, prune it, open the watch connection; called by
        ``open()`` with the new connection, under the lock it holds."""
        rows = await self._fetch(
            "reading the change log", "SELECT coalesce(max(n), 0) FROM memory_changes"
        )
        self._cursor = int(rows[0][0])
        self._epochs["*"] += 1  # what changed while closed is not in the log read from here
        # A process that only writes never prunes while searching: prune on open too (under
        # the lock open() holds already).
        with self._errors("pruning the change log"):
            await db.execute(
                "DELETE FROM memory_changes WHERE n <= ?", (self._cursor - _KEEP_CHANGES,)
            )
        self._watch = self._reader = self._open_watch()

    def _open_watch(self) -> sqlite3.Connection | None:
        if not isinstance(self.path, Path):
            return None  # an in-memory database is this connection's alone
        try:
            # No busy wait: a check that cannot run at once reads the change log instead, and a
            # read that cannot goes to the connection's thread.
            watch = sqlite3.connect(
                self.path.absolute().as_uri() + "?mode=ro",
                uri=True,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
            )
        except (sqlite3.Error, ValueError) as exc:
            logger.info("SQLite store %s: every search reads the change log (%s)", self.path, exc)
            return None
        watch.row_factory = sqlite3.Row
        return watch

    async def _stop_watch(self) -> None:
        """Close the vector index (it saves what changed) and the watch connection; called by
        ``close()`` before the connection closes."""
        if self.vectors is not None and self._db is not None:
            await self.vectors.close()
        watch, self._watch, self._synced_version = self._watch, None, None
        self._reader = None
        if watch is not None:
            watch.close()

    async def prepare_search(self, *, agent_id: str, embedding_model: str, dim: int) -> None:
        if self.vectors is not None:
            await self._sync_vectors()
            await self.vectors.prepare(agent_id, embedding_model, dim)

    async def _count_vectors(self, agent_id: str, model: str, dim: int, shard: Shard) -> int:
        held, kinds = codec.shard_condition(shard)
        rows = await self._fetch(
            "counting vectors",
            f"SELECT count(*) FROM memories WHERE agent_id = ? AND {held}",
            (agent_id, model, *kinds),
        )
        return int(rows[0][0])

    async def _load_vectors(
        self, agent_id: str, model: str, dim: int, shard: Shard
    ) -> AsyncIterator[VectorRows]:
        """The agent's ``model`` vectors of the shard's kinds in pages, in insertion order;
        statements of other callers run between pages."""
        held, kinds = codec.shard_condition(shard)
        last = -1
        while True:
            rows = await self._fetch(
                "loading vectors",
                f"""SELECT seq, id, room_id, entity_id, kind, created_at, embedding FROM memories
                WHERE agent_id = ? AND {held} AND length(embedding) = ? AND seq > ?
                ORDER BY seq LIMIT ?""",
                (agent_id, model, *kinds, dim * 4, last, _LOAD_PAGE),
            )
            if not rows:
                return
            yield codec.vector_rows(rows, dim)
            last = rows[-1][0]

    async def _sync_vectors(self) -> None:
        """Apply the change log (this process's writes and other processes') to the index;
        nothing to do when no connection committed anything since it was last read."""
        assert self.vectors is not None
        async with self._sync_lock:
            # Read before the change log: a commit after this point changes the version again.
            version = self._data_version()
            if version is not None and version == self._synced_version:
                return
            await self._read_changes()
            self._synced_version = version

    async def _kinds_version(
        self, kinds: Iterable[str], *, deletes: bool
    ) -> tuple[int, ...] | None:
        """A version of the memories of ``kinds`` in the file, taken once the change log is
        applied: it changes whenever one is added (by this process or another: the log has
        every insert but of a message), and with ``deletes`` whenever any memory is deleted;
        knowledge's also whenever a fragment's text changes. None where the store does not
        follow the log (no vector index)."""
        if self.vectors is None:
            return None
        await self._sync_vectors()
        keys = [*sorted(set(kinds)), "*", *(["?"] if deletes else [])]
        return tuple(self._epochs[key] for key in keys)

    def _data_version(self) -> int | None:
        """``PRAGMA data_version`` of the read-only watch connection, which changes whenever any
        connection commits (this store's own included, as the watch is another connection);
        None when unknown."""
        if self._watch is None:
            return None
        try:
            return int(self._watch.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            return None

    async def _read_changes(self) -> None:
        """Apply the change log past the cursor (or reset the index where it is too far behind).
        The few changes of a turn come with their rows (vectors included) in one read; more than
        :data:`_JOINED` are read as ids first, then their rows."""
        assert self.vectors is not None
        loaded = self.vectors.agents
        joined = await self._fetch_near(
            "reading the change log",
            f"""SELECT c.n, c.agent_id, c.memory_id, {_CHANGED_COLUMNS},
                (SELECT kind FROM memories WHERE id = c.memory_id)
            FROM memory_changes AS c LEFT JOIN memories AS m
                ON m.id = c.memory_id AND c.agent_id IN (SELECT value FROM json_each(?))
            WHERE c.n > ? ORDER BY c.n LIMIT ?""",
            (json.dumps(sorted(loaded)), self._cursor, _JOINED + 1),
        )
        if not joined:
            return
        if len(joined) <= _JOINED and not self._gap(joined[0][0]):
            self._cursor = int(joined[-1][0])
            for kind in {row[-1] or "?" for row in joined}:
                self._epochs[kind] += 1
            wanted = {row[2]: row[1] for row in joined if row[1] in loaded}
            if wanted:
                # The changed rows, once each (a memory changed twice is read twice, the same).
                changed = list({row[4]: row[3:] for row in joined if row[4] is not None}.values())
                self._apply_rows(wanted, changed)
            await self._maybe_prune(len(joined))
            return
        changes = await self._fetch(
            "reading the change log",
            "SELECT n, agent_id, memory_id FROM memory_changes WHERE n > ? ORDER BY n LIMIT ?",
            (self._cursor, _SYNC_LIMIT + 1),
        )
        if not changes:
            return
        self._epochs["*"] += 1  # too many to look at one by one
        start = self._cursor
        gap = self._gap(changes[0][0])  # pruned before this process read it
        self._cursor = int(changes[-1][0])
        if gap or len(changes) > _SYNC_LIMIT:
            # Too many to replay one by one: the agents concerned reload on their next search.
            rows = await self._fetch(
                "reading the change log",
                "SELECT coalesce(max(n), 0) FROM memory_changes",
            )
            self._cursor = int(rows[0][0])
            if gap:
                self.vectors.reset()
                return
            agents = await self._fetch(
                "reading the change log",
                "SELECT DISTINCT agent_id FROM memory_changes WHERE n > ? AND n <= ?",
                (start, self._cursor),
            )
            for row in agents:
                self.vectors.reset(row[0])
            return
        loaded = self.vectors.agents
        wanted = {row[2]: row[1] for row in changes if row[1] in loaded}
        if wanted:
            await self._apply_changes(wanted)
        await self._maybe_prune(len(changes))

    def _gap(self, first: int) -> bool:
        """Whether the log was pruned past the cursor before this process read it."""
        return bool(self._cursor) and first > self._cursor + 1

    async def _maybe_prune(self, read: int) -> None:
        """Prune the log about every ``_PRUNE_EVERY`` changes (``read`` were just read)."""
        if self._cursor % _PRUNE_EVERY < read:
            await self._write(
                "pruning the change log",
                "DELETE FROM memory_changes WHERE n <= ?",
                (self._cursor - _KEEP_CHANGES,),
            )

    async def _apply_changes(self, agents_by_id: dict[str, str]) -> None:
        rows = await self._fetch(
            "reading changed vectors",
            f"""SELECT {_CHANGED_COLUMNS.replace("m.", "")}
            FROM memories WHERE id IN (SELECT value FROM json_each(?))""",
            (json.dumps(list(agents_by_id)),),
        )
        self._apply_rows(agents_by_id, rows)

    def _apply_rows(self, agents_by_id: dict[str, str], rows: Sequence[Sequence[Any]]) -> None:
        """Bring the index to ``rows`` (of :data:`_CHANGED_COLUMNS`), the memories still present
        of the changed ones (``agents_by_id``: memory id → agent); the others are gone."""
        assert self.vectors is not None
        loaded = self.vectors.agents
        groups: dict[tuple[str, str, int], list[Sequence[Any]]] = defaultdict(list)
        for row in rows:
            if row[6] is not None and row[7] is not None and row[8] in loaded:
                dim = len(row[6]) // 4
                groups[(row[8], row[7], dim)].append(row)
        for (agent_id, model, dim), group in groups.items():
            self.vectors.upsert(agent_id, model, codec.vector_rows(group, dim))
        present = {row[1] for row in rows if row[6] is not None}
        gone: dict[str, list[str]] = defaultdict(list)
        for memory_id, agent_id in agents_by_id.items():
            if memory_id not in present:
                gone[agent_id].append(memory_id)
        for agent_id, ids in gone.items():
            self.vectors.remove(ids, agent_id=agent_id)
