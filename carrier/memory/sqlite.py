"""SQLiteStore: the embedded default Store. One file, no server.

One aiosqlite connection (one worker thread) serves every call, so statements never run at the
same time; an asyncio lock additionally keeps each write, and each multi-statement transaction,
whole. Vector search filters in SQL and scores the matching vectors with exact numpy cosine.

Rows reference each other by id only (rooms, entities and memories name their agent, but no
foreign key is declared): the store behaves like the MongoDB one, where a memory may be written
before its room, and :meth:`SQLiteStore.delete_agent` removes what an agent owns explicitly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import aiosqlite

from carrier.errors import ConfigError, StoreError
from carrier.memory.base import Store
from carrier.memory.vector import cosine_top_k, from_blob, from_blobs, to_blob
from carrier.types import (
    AgentRecord,
    Content,
    Entity,
    Memory,
    MemoryKind,
    MemoryStatus,
    Room,
    RoomState,
    ScoredMemory,
    utcnow,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
"""How long a statement waits for another process's write lock before failing."""

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the initial schema. Timestamps are integer microseconds since the epoch, UTC, so that
    # ordering and ``before`` comparisons are exact.
    (
        """CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            character TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )""",
        """CREATE TABLE rooms (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            platform TEXT NOT NULL,
            platform_id TEXT NOT NULL,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX rooms_agent ON rooms (agent_id)",
        """CREATE TABLE entities (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            platform TEXT NOT NULL,
            platform_id TEXT NOT NULL,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX entities_agent ON entities (agent_id)",
        """CREATE TABLE participants (
            room_id TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            PRIMARY KEY (room_id, entity_id)
        )""",
        "CREATE INDEX participants_entity ON participants (entity_id)",
        """CREATE TABLE room_states (
            agent_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            state TEXT NOT NULL,
            PRIMARY KEY (agent_id, room_id)
        )""",
        """CREATE TABLE memories (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            content TEXT NOT NULL,
            embedding BLOB,
            embedding_model TEXT,
            error TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )""",
        "CREATE INDEX memories_room ON memories (agent_id, room_id, created_at)",
        "CREATE INDEX memories_entity ON memories (agent_id, entity_id, created_at)",
        "CREATE INDEX memories_kind ON memories (agent_id, kind, created_at)",
        "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ),
)
"""Schema steps: step ``i`` (0-based) brings the database to version ``i + 1``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MEMORY_COLUMNS = (
    "id, agent_id, room_id, entity_id, kind, status, content, embedding, embedding_model, "
    "error, created_at, updated_at"
)


def _to_us(value: datetime) -> int:
    """Integer microseconds since the epoch; a naive datetime is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICROSECOND


def _from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _memory_from_row(row: sqlite3.Row) -> Memory:
    blob = row["embedding"]
    return Memory(
        id=row["id"],
        agent_id=row["agent_id"],
        room_id=row["room_id"],
        entity_id=row["entity_id"],
        kind=MemoryKind(row["kind"]),
        status=MemoryStatus(row["status"]),
        content=Content.model_validate_json(row["content"]),
        embedding=from_blob(blob).tolist() if blob is not None else None,
        embedding_model=row["embedding_model"],
        error=row["error"],
        created_at=_from_us(row["created_at"]),
        updated_at=_from_us(row["updated_at"]),
    )


def _blob(embedding: Sequence[float] | None) -> bytes | None:
    return to_blob(embedding) if embedding is not None else None


def _memory_filters(
    agent_id: str,
    room_id: str | None = None,
    entity_id: str | None = None,
    kinds: Sequence[MemoryKind] | None = None,
    statuses: Sequence[MemoryStatus] | None = None,
) -> tuple[list[str], list[Any]]:
    """SQL conditions and parameters; an empty ``kinds`` or ``statuses`` matches nothing."""
    where, params = ["agent_id = ?"], [agent_id]
    if room_id is not None:
        where.append("room_id = ?")
        params.append(room_id)
    if entity_id is not None:
        where.append("entity_id = ?")
        params.append(entity_id)
    for column, values in (("kind", kinds), ("status", statuses)):
        if values is not None:
            where.append(f"{column} IN ({', '.join('?' * len(values))})")
            params.extend(str(v) for v in values)
    return where, params


class SQLiteStore(Store):
    """The Store in one SQLite file (WAL mode), or in memory with ``path=":memory:"``.

    Usage::

        async with SQLiteStore(path=SQLiteStore.default_path(settings.data_dir)) as store:
            ...
    """

    def __init__(self, *, path: str | Path) -> None:
        self.path = path if str(path) == ":memory:" else Path(path).expanduser()
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

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
                self._db = await self._connect()

    async def _connect(self) -> aiosqlite.Connection:
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
            await self._migrate(db)
        except BaseException:
            await db.close()
            raise
        return db

    async def close(self) -> None:
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

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        with self._errors("migrating the schema"):
            await db.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            # IMMEDIATE takes the write lock first, so two processes opening one new file do
            # not both apply the same steps.
            await db.execute("BEGIN IMMEDIATE")
            try:
                async with db.execute("SELECT MAX(version) FROM schema_version") as cursor:
                    row = await cursor.fetchone()
                current = int(row[0] or 0) if row is not None else 0
                if current > SCHEMA_VERSION:
                    raise StoreError(
                        f"the SQLite store {self.path} has schema version {current}, newer than "
                        f"this Carrier supports ({SCHEMA_VERSION}); upgrade Carrier "
                        "(pip install -U carrier) or point CARRIER_DATA_DIR elsewhere"
                    )
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version - 1]:
                        await db.execute(statement)
                    await db.execute(
                        "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                        (version, utcnow().isoformat()),
                    )
                    logger.info("SQLite store %s migrated to schema version %d", self.path, version)
                await db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    await db.execute("ROLLBACK")
                raise

    # -- plumbing --------------------------------------------------------------------------
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
            async with db.execute(sql, params) as cursor:
                return list(await cursor.fetchall())

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
                async with db.execute(sql, params) as cursor:
                    return cursor.rowcount

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

    # -- agents ----------------------------------------------------------------------------
    async def upsert_agent(self, agent: AgentRecord) -> None:
        """Insert or replace; the first ``created_at`` is kept."""
        data = agent.model_dump(mode="json")
        await self._write(
            f"saving agent {agent.id}",
            """INSERT INTO agents (id, name, character, status, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET name = excluded.name, character = excluded.character,
                status = excluded.status, updated_at = excluded.updated_at""",
            (
                agent.id,
                agent.name,
                json.dumps(data["character"]),
                agent.status,
                _to_us(agent.created_at),
                _to_us(agent.updated_at),
            ),
        )

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        row = await self._fetch_one(
            f"reading agent {agent_id}", "SELECT * FROM agents WHERE id = ?", (agent_id,)
        )
        return self._agent_from_row(row) if row is not None else None

    async def list_agents(self) -> list[AgentRecord]:
        rows = await self._fetch("listing agents", "SELECT * FROM agents ORDER BY created_at, id")
        return [self._agent_from_row(row) for row in rows]

    @staticmethod
    def _agent_from_row(row: sqlite3.Row) -> AgentRecord:
        return AgentRecord(
            id=row["id"],
            name=row["name"],
            character=json.loads(row["character"]),
            status=row["status"],
            created_at=_from_us(row["created_at"]),
            updated_at=_from_us(row["updated_at"]),
        )

    async def delete_agent(self, agent_id: str) -> bool:
        async with self._transaction(f"deleting agent {agent_id}") as db:
            await db.execute(
                """DELETE FROM participants
                WHERE room_id IN (SELECT id FROM rooms WHERE agent_id = ?)
                   OR entity_id IN (SELECT id FROM entities WHERE agent_id = ?)""",
                (agent_id, agent_id),
            )
            for table in ("room_states", "memories", "rooms", "entities"):
                await db.execute(f"DELETE FROM {table} WHERE agent_id = ?", (agent_id,))
            async with db.execute("DELETE FROM agents WHERE id = ?", (agent_id,)) as cursor:
                return cursor.rowcount > 0

    # -- rooms, entities, participants -----------------------------------------------------
    async def upsert_room(self, room: Room) -> None:
        await self._write(
            f"saving room {room.id}",
            """INSERT INTO rooms (id, agent_id, platform, platform_id, data) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id,
                platform = excluded.platform, platform_id = excluded.platform_id,
                data = excluded.data""",
            (room.id, room.agent_id, room.platform, room.platform_id, room.model_dump_json()),
        )

    async def get_room(self, room_id: str) -> Room | None:
        row = await self._fetch_one(
            f"reading room {room_id}", "SELECT data FROM rooms WHERE id = ?", (room_id,)
        )
        return Room.model_validate_json(row["data"]) if row is not None else None

    async def upsert_entity(self, entity: Entity) -> None:
        async with self._transaction(f"saving entity {entity.id}") as db:
            async with db.execute("SELECT data FROM entities WHERE id = ?", (entity.id,)) as cursor:
                row = await cursor.fetchone()
            if row is not None:
                known = Entity.model_validate_json(row["data"]).names
                merged = known + [n for n in dict.fromkeys(entity.names) if n not in known]
                entity = entity.model_copy(update={"names": merged})
            await db.execute(
                """INSERT OR REPLACE INTO entities (id, agent_id, platform, platform_id, data)
                VALUES (?, ?, ?, ?, ?)""",
                (
                    entity.id,
                    entity.agent_id,
                    entity.platform,
                    entity.platform_id,
                    entity.model_dump_json(),
                ),
            )

    async def get_entity(self, entity_id: str) -> Entity | None:
        row = await self._fetch_one(
            f"reading entity {entity_id}", "SELECT data FROM entities WHERE id = ?", (entity_id,)
        )
        return Entity.model_validate_json(row["data"]) if row is not None else None

    async def add_participant(self, room_id: str, entity_id: str) -> None:
        await self._write(
            f"adding entity {entity_id} to room {room_id}",
            "INSERT OR IGNORE INTO participants (room_id, entity_id) VALUES (?, ?)",
            (room_id, entity_id),
        )

    async def list_participants(self, room_id: str) -> list[str]:
        rows = await self._fetch(
            f"listing participants of room {room_id}",
            "SELECT entity_id FROM participants WHERE room_id = ? ORDER BY rowid",
            (room_id,),
        )
        return [row["entity_id"] for row in rows]

    async def get_room_state(self, agent_id: str, room_id: str) -> RoomState | None:
        row = await self._fetch_one(
            f"reading the state of room {room_id}",
            "SELECT state FROM room_states WHERE agent_id = ? AND room_id = ?",
            (agent_id, room_id),
        )
        return RoomState(row["state"]) if row is not None else None

    async def set_room_state(self, agent_id: str, room_id: str, state: RoomState | None) -> None:
        what = f"setting the state of room {room_id}"
        if state is None:
            sql = "DELETE FROM room_states WHERE agent_id = ? AND room_id = ?"
            await self._write(what, sql, (agent_id, room_id))
        else:
            sql = "INSERT OR REPLACE INTO room_states (agent_id, room_id, state) VALUES (?, ?, ?)"
            await self._write(what, sql, (agent_id, room_id, str(state)))

    # -- memories --------------------------------------------------------------------------
    async def add_memory(self, memory: Memory) -> Memory:
        # RETURNING yields the row only when it was inserted: one round trip for a new memory,
        # and a second (the read) only for a redelivered one.
        sql = (
            f"INSERT OR IGNORE INTO memories ({_MEMORY_COLUMNS}) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_MEMORY_COLUMNS}"
        )
        params = (
            memory.id,
            memory.agent_id,
            memory.room_id,
            memory.entity_id,
            str(memory.kind),
            str(memory.status),
            memory.content.model_dump_json(),
            _blob(memory.embedding),
            memory.embedding_model,
            memory.error,
            _to_us(memory.created_at),
            _to_us(memory.updated_at),
        )
        db = self._conn()
        async with self._lock:
            with self._errors(f"adding memory {memory.id}"):
                async with db.execute(sql, params) as cursor:
                    row = await cursor.fetchone()
        if row is not None:
            return _memory_from_row(row)
        stored = await self.get_memory(memory.id)
        if stored is None:  # pragma: no cover - deleted between the two statements
            raise StoreError(f"SQLite store {self.path}: memory {memory.id} vanished on insert")
        return stored

    async def get_memory(self, memory_id: str) -> Memory | None:
        row = await self._fetch_one(
            f"reading memory {memory_id}",
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ?",
            (memory_id,),
        )
        return _memory_from_row(row) if row is not None else None

    async def update_memory(self, memory: Memory) -> None:
        await self._write(
            f"updating memory {memory.id}",
            """UPDATE memories SET content = ?, embedding = ?, embedding_model = ?, status = ?,
                error = ?, updated_at = ?
            WHERE id = ?""",
            (
                memory.content.model_dump_json(),
                _blob(memory.embedding),
                memory.embedding_model,
                str(memory.status),
                memory.error,
                _to_us(utcnow()),
                memory.id,
            ),
        )

    async def set_memory_status(
        self, memory_id: str, status: MemoryStatus, *, error: str | None = None
    ) -> None:
        await self._write(
            f"setting the status of memory {memory_id}",
            "UPDATE memories SET status = ?, error = ?, updated_at = ? WHERE id = ?",
            (str(status), error, _to_us(utcnow()), memory_id),
        )

    async def get_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        before: datetime | None = None,
        limit: int = 50,
    ) -> list[Memory]:
        where, params = _memory_filters(agent_id, room_id, entity_id, kinds, statuses)
        if before is not None:
            where.append("created_at < ?")
            params.append(_to_us(before))
        rows = await self._fetch(
            "reading memories",
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?",
            [*params, max(limit, 0)],
        )
        return [_memory_from_row(row) for row in rows]

    async def count_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
    ) -> int:
        where, params = _memory_filters(agent_id, room_id, kinds=kinds)
        rows = await self._fetch(
            "counting memories",
            f"SELECT COUNT(*) FROM memories WHERE {' AND '.join(where)}",
            params,
        )
        return int(rows[0][0])

    async def search_memories(
        self,
        *,
        agent_id: str,
        embedding: Sequence[float],
        embedding_model: str,
        k: int = 10,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        exclude_ids: Sequence[str] = (),
        min_score: float = -1.0,
    ) -> list[ScoredMemory]:
        dim = len(embedding)
        if k <= 0 or dim == 0:
            return []
        where, params = _memory_filters(agent_id, room_id, entity_id, kinds)
        # Same model, same dimension: vectors of different models never meet.
        where += ["embedding_model = ?", "length(embedding) = ?"]
        params += [embedding_model, dim * 4]
        if exclude_ids:
            where.append("id NOT IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(list(exclude_ids)))
        candidates = await self._fetch(
            "searching memories",
            f"SELECT id, embedding FROM memories WHERE {' AND '.join(where)}",
            params,
        )
        if not candidates:
            return []
        matrix = from_blobs((row["embedding"] for row in candidates), dim)
        indices, scores = cosine_top_k(embedding, matrix, k)
        hits = {
            candidates[int(i)]["id"]: float(score)
            for i, score in zip(indices, scores, strict=True)
            if score >= min_score
        }
        if not hits:
            return []
        rows = await self._fetch(
            "reading search results",
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(hits)),),
        )
        by_id = {row["id"]: _memory_from_row(row) for row in rows}
        # A memory deleted between the two queries is simply left out.
        return [
            ScoredMemory(memory=by_id[memory_id], score=score)
            for memory_id, score in hits.items()
            if memory_id in by_id
        ]

    async def delete_memory(self, memory_id: str) -> bool:
        changed = await self._write(
            f"deleting memory {memory_id}", "DELETE FROM memories WHERE id = ?", (memory_id,)
        )
        return changed > 0

    async def delete_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
    ) -> int:
        where, params = _memory_filters(agent_id, room_id, entity_id, kinds)
        return await self._write(
            "deleting memories", f"DELETE FROM memories WHERE {' AND '.join(where)}", params
        )

    # -- settings --------------------------------------------------------------------------
    async def get_setting(self, key: str) -> Any | None:
        row = await self._fetch_one(
            f"reading setting {key!r}", "SELECT value FROM settings WHERE key = ?", (key,)
        )
        return json.loads(row["value"]) if row is not None else None

    async def set_setting(self, key: str, value: Any) -> None:
        await self._write(
            f"saving setting {key!r}",
            "INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)",
            (key, json.dumps(value)),
        )
