"""SQLiteStore: the embedded default Store. One file, no server.

One aiosqlite connection (one worker thread) serves every call, so statements never run at the
same time; an asyncio lock additionally keeps each write, and each multi-statement transaction,
whole.

Recall: vector search runs in process, over an agent's vectors held in memory
(:class:`~carrier.memory.index.VectorIndex`: exact, or ANN for large sets, its index saved beside
the file as ``<file>.vectors/``). The index stays in step through a change log that triggers
write (``memory_changes``): before each search the store applies the entries it has not seen, so
it sees its own writes and other processes' alike. Until an agent's vectors are loaded, a search
scores the matching vectors read from the file. Full-text search uses an FTS5 table that triggers
keep in step too; :meth:`SQLiteStore.search_hybrid` fuses both rankings.

Rows reference each other by id only (rooms, entities and memories name their agent, but no
foreign key is declared): the store behaves like the MongoDB one, where a memory may be written
before its room, and :meth:`SQLiteStore.delete_agent` removes what an agent owns explicitly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from carrier.errors import ConfigError
from carrier.memory import _sqlite_codec as codec
from carrier.memory._ranked import MemoryQuery, RankedSearch, search_index
from carrier.memory._sqlite_conn import SQLiteConnection
from carrier.memory._sqlite_memories import Memories
from carrier.memory._sqlite_records import Records
from carrier.memory._sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from carrier.memory.base import Store
from carrier.memory.hybrid import folded, fts5_match, query_terms, rarest_terms
from carrier.memory.index import Shard, VectorIndex, VectorRows
from carrier.memory.vector import cosine_top_k, from_blobs
from carrier.types import (
    ScoredMemory,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]

logger = logging.getLogger(__name__)

_LOAD_PAGE = 10_000
"""Vectors read per statement while loading the index."""
_SYNC_LIMIT = 20_000
"""More pending changes than this and the index reloads instead of replaying them."""
_KEEP_CHANGES = 100_000
_PRUNE_EVERY = 10_000
"""The change log keeps the last ``_KEEP_CHANGES`` entries (a process further behind reloads),
pruned about every ``_PRUNE_EVERY`` changes."""
_DOC_COUNT_TTL_S = 300.0
_DOC_COUNT_CACHE = 50_000
"""Words whose memory counts are kept (for :meth:`SQLiteStore._doc_counts`), and for how long."""


class SQLiteStore(Records, Memories, RankedSearch, SQLiteConnection, Store):
    """The Store in one SQLite file (WAL mode), or in memory with ``path=":memory:"``.

    Usage::

        async with SQLiteStore(path=SQLiteStore.default_path(settings.data_dir)) as store:
            ...
    """

    def __init__(self, *, path: str | Path, vector_index: bool = True) -> None:
        super().__init__(path=path)
        self._sync_lock = asyncio.Lock()
        self._cursor = 0
        """The last ``memory_changes`` entry applied to the vector index."""
        self._watch: sqlite3.Connection | None = None
        """A read-only connection used on the event loop's thread for ``PRAGMA data_version``
        alone (a few microseconds, no hand-off to the connection's thread): see
        :meth:`_data_version`."""
        self._synced_version: int | None = None
        """The data version seen when the change log was last read in full."""
        self._doc_count_cache: OrderedDict[str, tuple[int, float]] = OrderedDict()
        """Word → (memories holding it, when read), for :meth:`_doc_counts`."""
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
                    rows = await self._fetch(
                        "reading the change log", "SELECT coalesce(max(n), 0) FROM memory_changes"
                    )
                    self._cursor = int(rows[0][0])
                    # A process that only writes never prunes while searching: prune on open
                    # too (under the lock open() holds already).
                    with self._errors("pruning the change log"):
                        await db.execute(
                            "DELETE FROM memory_changes WHERE n <= ?",
                            (self._cursor - _KEEP_CHANGES,),
                        )
                    self._watch = self._open_watch()
                except BaseException:
                    self._db = None
                    await db.close()  # its thread would keep the process from exiting
                    raise

    def _open_watch(self) -> sqlite3.Connection | None:
        if not isinstance(self.path, Path):
            return None  # an in-memory database is this connection's alone
        try:
            # No busy wait: a check that cannot run at once reads the change log instead.
            return sqlite3.connect(
                self.path.absolute().as_uri() + "?mode=ro",
                uri=True,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
            )
        except (sqlite3.Error, ValueError) as exc:
            logger.info("SQLite store %s: every search reads the change log (%s)", self.path, exc)
            return None

    async def close(self) -> None:
        if self.vectors is not None and self._db is not None:
            await self.vectors.close()
        watch, self._watch, self._synced_version = self._watch, None, None
        if watch is not None:
            watch.close()
        db, self._db = self._db, None
        if db is not None:
            async with self._lock:  # let a running write finish
                await db.close()

    async def schema_version(self) -> int:
        """The schema version recorded in the database."""
        rows = await self._fetch(
            "reading the schema version", "SELECT MAX(version) FROM schema_version"
        )
        return int(rows[0][0] or 0)

    async def _vector_hits(
        self, query: MemoryQuery, embedding: Sequence[float], embedding_model: str, k: int
    ) -> list[tuple[str, float]]:
        """From the vector index when it is loaded, else from the vectors in the database."""
        if self.vectors is not None:
            await self._sync_vectors()
            found = await search_index(self.vectors, query, embedding, embedding_model, k)
            if found is not None:
                return found
        # Not loaded yet (or no index): score the matching vectors read from the database.
        dim = len(embedding)
        where, params = codec.query_filters(query)
        # Same model, same dimension: vectors of different models never meet.
        where += ["embedding_model = ?", "length(embedding) = ?"]
        params += [embedding_model, dim * 4]
        candidates = await self._fetch(
            "searching memories",
            f"SELECT id, embedding FROM memories WHERE {' AND '.join(where)}",
            params,
        )
        if not candidates:
            return []
        matrix = from_blobs((row["embedding"] for row in candidates), dim)
        indices, scores = cosine_top_k(embedding, matrix, k)
        return [
            (candidates[int(i)]["id"], float(score))
            for i, score in zip(indices, scores, strict=True)
        ]

    async def _scored(
        self, hits: Sequence[tuple[str, float]], *, embeddings: bool = True
    ) -> list[ScoredMemory]:
        if not hits:
            return []
        columns = codec.MEMORY_COLUMNS if embeddings else codec.MEMORY_COLUMNS_NO_VECTOR
        rows = await self._fetch(
            "reading search results",
            f"SELECT {columns} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([memory_id for memory_id, _ in hits]),),
        )
        by_id = {row["id"]: codec.memory_from_row(row) for row in rows}
        return [
            ScoredMemory(memory=by_id[memory_id], score=score)
            for memory_id, score in hits
            if memory_id in by_id
        ]

    async def _text_hits(self, query: MemoryQuery, text: str, limit: int) -> list[str]:
        """By FTS5 bm25, over the query's rarest words (see :func:`rarest_terms`)."""
        terms = query_terms(text)
        if not terms:
            return []
        keys = {folded(term): term for term in terms}
        counts = await self._doc_counts(list(keys))
        match = fts5_match(rarest_terms({keys[key]: counts[key] for key in keys}))
        if match is None:
            return []
        where, params = codec.query_filters(query, table="m.")
        rows = await self._fetch(
            "searching memories by text",
            f"""SELECT m.id FROM memories_fts JOIN memories AS m ON m.seq = memories_fts.rowid
            WHERE memories_fts MATCH ? AND {" AND ".join(where)}
            ORDER BY bm25(memories_fts) LIMIT ?""",
            [match, *params, limit],
        )
        return [row[0] for row in rows]

    async def _doc_counts(self, terms: list[str]) -> dict[str, int]:
        """In how many memories each (folded) term occurs. Looking a word up in FTS5's
        vocabulary costs ~0.6 ms, so counts are kept a while: they change slowly, and only
        choose which words a search looks for."""
        now = time.monotonic()
        counts: dict[str, int] = {}
        missing = []
        for term in terms:
            known = self._doc_count_cache.get(term)
            if known is not None and now - known[1] < _DOC_COUNT_TTL_S:
                counts[term] = known[0]
            else:
                missing.append(term)
        if missing:
            rows = await self._fetch(
                "reading the full-text vocabulary",
                f"SELECT term, doc FROM memories_vocab WHERE term IN "
                f"({', '.join('?' * len(missing))})",
                missing,
            )
            found = {row[0]: int(row[1]) for row in rows}
            for term in missing:
                counts[term] = found.get(term, 0)
                if counts[term]:  # a word not seen yet may arrive any moment: asked again
                    self._doc_count_cache[term] = (counts[term], now)
                    self._doc_count_cache.move_to_end(term)
            while len(self._doc_count_cache) > _DOC_COUNT_CACHE:
                self._doc_count_cache.popitem(last=False)
        return counts

    # -- the vector index --------------------------------------------------------------------
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
        """Apply the change log past the cursor (or reset the index where it is too far behind)."""
        assert self.vectors is not None
        changes = await self._fetch(
            "reading the change log",
            "SELECT n, agent_id, memory_id FROM memory_changes WHERE n > ? ORDER BY n LIMIT ?",
            (self._cursor, _SYNC_LIMIT + 1),
        )
        if not changes:
            return
        start = self._cursor
        gap = start and changes[0][0] > start + 1  # pruned before this process read it
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
        if self._cursor % _PRUNE_EVERY < len(changes):
            await self._write(
                "pruning the change log",
                "DELETE FROM memory_changes WHERE n <= ?",
                (self._cursor - _KEEP_CHANGES,),
            )

    async def _apply_changes(self, agents_by_id: dict[str, str]) -> None:
        assert self.vectors is not None
        rows = await self._fetch(
            "reading changed vectors",
            """SELECT seq, id, room_id, entity_id, kind, created_at, embedding, embedding_model,
                agent_id
            FROM memories WHERE id IN (SELECT value FROM json_each(?))""",
            (json.dumps(list(agents_by_id)),),
        )
        groups: dict[tuple[str, str, int], list[sqlite3.Row]] = defaultdict(list)
        for row in rows:
            if row["embedding"] is not None and row["embedding_model"] is not None:
                dim = len(row["embedding"]) // 4
                groups[(row["agent_id"], row["embedding_model"], dim)].append(row)
        for (agent_id, model, dim), group in groups.items():
            self.vectors.upsert(agent_id, model, codec.vector_rows(group, dim))
        present = {row["id"] for row in rows if row["embedding"] is not None}
        gone: dict[str, list[str]] = defaultdict(list)
        for memory_id, agent_id in agents_by_id.items():
            if memory_id not in present:
                gone[agent_id].append(memory_id)
        for agent_id, ids in gone.items():
            self.vectors.remove(ids, agent_id=agent_id)
