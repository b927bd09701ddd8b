"""Memories in the SQLite store: writes, reads by room, person and kind, deletes, stale vectors.

A memory is one row (see :mod:`carrier.memory._sqlite_schema`); its text reaches the full-text
index, and its vector the change log, through triggers, so none of these writes can forget them.
Reads name their columns so that a caller that wants text leaves the vectors unread
(``embeddings=False``).
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from carrier._sqlite_thread import immediate
from carrier.errors import StoreError
from carrier.memory import _sqlite_codec as codec
from carrier.memory._sqlite_changes import ChangeWatch
from carrier.memory.base import RecordedTurn
from carrier.types import Memory, MemoryKind, MemoryStatus, to_us, utcnow

__all__ = ["Memories"]

_NEAR_LIMIT = 100
"""A room's or a person's latest memories up to this many are read on the event loop's thread."""
_NONE_YET_KEPT = 10_000
"""Empty reads remembered (see ``Memories._none_yet``)."""
_Fetch = Callable[[str, str, Sequence[Any]], Awaitable[list[sqlite3.Row]]]
"""``_fetch`` or ``_fetch_near``."""
_INSERT_NEW = (
    f"INSERT OR IGNORE INTO memories ({codec.MEMORY_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""Adds a memory unless its id is stored already; for a caller that holds the memory, whether
it was added is the row count."""
_INSERT = f"{_INSERT_NEW} RETURNING {codec.MEMORY_COLUMNS}"
"""The same, giving back the row it added (none when the id was stored already)."""
_SET_STATUS = "UPDATE memories SET status = ?, error = ?, updated_at = ? WHERE id = ?"
_SET_VECTOR = "UPDATE memories SET embedding = ?, embedding_model = ?, updated_at = ? WHERE id = ?"


def _vector_params(memory: Memory, now_us: int) -> tuple[object, ...]:
    return (codec.vector_blob(memory.embedding), memory.embedding_model, now_us, memory.id)


def _insert_params(memory: Memory) -> tuple[object, ...]:
    return (
        memory.id,
        memory.agent_id,
        memory.room_id,
        memory.entity_id,
        str(memory.kind),
        str(memory.status),
        memory.content.model_dump_json(),
        codec.vector_blob(memory.embedding),
        memory.embedding_model,
        memory.error,
        to_us(memory.created_at),
        to_us(memory.updated_at),
    )


def _status_change(
    memory_id: str,
    status: MemoryStatus,
    error: str | None,
    expect: Sequence[MemoryStatus] | None,
    now_us: int,
) -> tuple[str, list[object]] | None:
    """The statement of a status change (None: ``expect`` is empty, nothing changes). With
    ``expect`` it is one statement: SQLite runs it under the write lock, so the check and the
    change cannot be split by another connection's write."""
    sql = _SET_STATUS
    params: list[object] = [str(status), error, now_us, memory_id]
    if expect is not None:
        if not expect:
            return None
        sql += f" AND status IN ({', '.join('?' * len(expect))})"
        params += [str(s) for s in expect]
    return sql, params


class Memories(ChangeWatch):
    """The Store's methods for memories, but search (a part of
    :class:`~carrier.memory.sqlite.SQLiteStore`)."""

    def __init__(self, *, path: str | Path, vector_index: bool = True) -> None:
        super().__init__(path=path, vector_index=vector_index)
        self._none_yet: OrderedDict[tuple[Any, ...], tuple[int, ...]] = OrderedDict()
        """Reads of kinds other than messages that found nothing, and the version of those
        kinds then (``_kinds_version``): the same read finds nothing while it holds (a
        person's facts, a room's summaries: none, turn after turn, until one is added)."""

    async def add_memory(self, memory: Memory) -> Memory:
        # RETURNING yields the row only when it was inserted: one round trip for a new memory,
        # and a second (the read) only for a redelivered one.
        params = _insert_params(memory)
        rows = await self._write_near(
            f"adding memory {memory.id}", lambda db: db.execute(_INSERT, params).fetchall()
        )
        if rows:
            return codec.memory_from_row(rows[0])
        stored = await self.get_memory(memory.id)
        if stored is None:  # pragma: no cover - deleted between the two statements
            raise StoreError(f"SQLite store {self.path}: memory {memory.id} vanished on insert")
        return stored

    async def get_memory(self, memory_id: str) -> Memory | None:
        rows = await self._fetch_near(
            f"reading memory {memory_id}",
            f"SELECT {codec.MEMORY_COLUMNS} FROM memories WHERE id = ?",
            (memory_id,),
        )
        return codec.memory_from_row(rows[0]) if rows else None

    async def update_memory(self, memory: Memory) -> None:
        content, status, now = memory.content.model_dump_json(), str(memory.status), to_us(utcnow())
        if memory.vector_unread:  # the stored vector stays
            sql = "UPDATE memories SET content = ?, status = ?, error = ?, updated_at = ? WHERE id = ?"
            params: tuple[object, ...] = (content, status, memory.error, now, memory.id)
        else:
            sql = """UPDATE memories SET content = ?, embedding = ?, embedding_model = ?,
                status = ?, error = ?, updated_at = ?
            WHERE id = ?"""
            blob = codec.vector_blob(memory.embedding)
            params = (content, blob, memory.embedding_model, status, memory.error, now, memory.id)
        await self._write_near(f"updating memory {memory.id}", lambda db: db.execute(sql, params))

    async def set_memory_vector(self, memory: Memory) -> bool:
        params = _vector_params(memory, to_us(utcnow()))
        changed: int = await self._write_near(
            f"writing the vector of memory {memory.id}",
            lambda db: db.execute(_SET_VECTOR, params).rowcount,
        )
        return changed > 0

    async def set_memory_status(
        self,
        memory_id: str,
        status: MemoryStatus,
        *,
        error: str | None = None,
        expect: Sequence[MemoryStatus] | None = None,
    ) -> bool:
        change = _status_change(memory_id, status, error, expect, to_us(utcnow()))
        if change is None:
            return False
        changed: int = await self._write_near(
            f"setting the status of memory {memory_id}", lambda db: db.execute(*change).rowcount
        )
        return changed > 0

    async def record_turn(
        self,
        message: Memory,
        status: MemoryStatus,
        *,
        error: str | None = None,
        expect: Sequence[MemoryStatus] | None = None,
        replies: Sequence[Memory] = (),
        vector: bool = False,
    ) -> RecordedTurn:
        now_us = to_us(utcnow())
        inserts = [(reply, _insert_params(reply)) for reply in replies]
        vector_params = _vector_params(message, now_us)
        change = _status_change(message.id, status, error, expect, now_us)

        def write(db: sqlite3.Connection) -> tuple[list[Memory | sqlite3.Row], bool]:
            stored: list[Memory | sqlite3.Row] = []
            with immediate(db):
                for reply, params in inserts:
                    if db.execute(_INSERT_NEW, params).rowcount:
                        stored.append(reply)  # the row holds just what it says
                        continue
                    # Recorded already (a turn run again): as it was stored.
                    stored += db.execute(
                        f"SELECT {codec.MEMORY_COLUMNS} FROM memories WHERE id = ?", (reply.id,)
                    ).fetchall()
                if vector:
                    db.execute(_SET_VECTOR, vector_params)
                changed = change is not None and db.execute(*change).rowcount > 0
            return stored, changed

        # The turn's writes in one transaction, one call (one hand-off where it goes to the
        # connection's thread).
        rows, changed = await self._write_near(f"recording the turn of message {message.id}", write)
        return RecordedTurn(
            [row if isinstance(row, Memory) else codec.memory_from_row(row) for row in rows],
            changed,
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
        embeddings: bool = True,
    ) -> list[Memory]:
        where, params = codec.memory_filters(agent_id, room_id, entity_id, kinds, statuses)
        if before is not None:
            where.append("created_at < ?")
            params.append(to_us(before))
        columns = codec.MEMORY_COLUMNS if embeddings else codec.MEMORY_COLUMNS_NO_VECTOR
        # A read of kinds but messages that found nothing finds nothing again until one of
        # those kinds is added (which the change log tells): it is not made again till then.
        key: tuple[Any, ...] | None = None
        version = None
        if kinds and statuses is None and limit > 0 and MemoryKind.MESSAGE not in kinds:
            version = await self._kinds_version(map(str, kinds), deletes=False)
            key = (agent_id, room_id, entity_id, tuple(sorted(map(str, kinds))), before)
            if version is not None and self._none_yet.get(key) == version:
                return []
        fetch = self._fetch_for(room_id, entity_id, limit)
        rows = await self._latest(fetch, columns, where, params, limit)
        if key is not None and version is not None:
            if rows:
                self._none_yet.pop(key, None)
            else:
                self._none_yet[key] = version
                self._none_yet.move_to_end(key)
                while len(self._none_yet) > _NONE_YET_KEPT:
                    self._none_yet.popitem(last=False)
        return [codec.memory_from_row(row) for row in rows]

    async def get_memories_reusing(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        limit: int = 50,
        known: Mapping[str, Memory],
    ) -> list[Memory]:
        # One read of the rows, but only those new or changed since ``known`` was read are
        # decoded: a room's history changes by a message or two a turn, and decoding its twenty
        # rows cost more than reading them.
        where, params = codec.memory_filters(agent_id, room_id, entity_id, kinds)
        fetch = self._fetch_for(room_id, entity_id, limit)
        rows = await self._latest(fetch, codec.MEMORY_COLUMNS_NO_VECTOR, where, params, limit)
        found = []
        for row in rows:
            memory = known.get(row["id"])
            if (
                memory is None
                or memory.embedding is not None
                or to_us(memory.updated_at) != row["updated_at"]
            ):
                memory = codec.memory_from_row(row)
            found.append(memory)
        return found

    def _fetch_for(self, room_id: str | None, entity_id: str | None, limit: int) -> _Fetch:
        """How to read a room's or a person's latest few (a turn's history, its facts), which
        come straight from an index: at once on the event loop's thread; other reads may
        scan, on the connection's thread."""
        near = (room_id is not None or entity_id is not None) and limit <= _NEAR_LIMIT
        return self._fetch_near if near else self._fetch

    @staticmethod
    async def _latest(
        fetch: _Fetch, columns: str, where: list[str], params: list[Any], limit: int
    ) -> list[sqlite3.Row]:
        """The ``columns`` of the newest ``limit`` memories ``where`` allows, newest first."""
        return await fetch(
            "reading memories",
            f"SELECT {columns} FROM memories WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?",
            [*params, max(limit, 0)],
        )

    async def count_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        since: datetime | None = None,
        entity_id: str | None = None,
    ) -> int:
        where, params = codec.memory_filters(agent_id, room_id, entity_id, kinds, since=since)
        rows = await self._fetch(
            "counting memories",
            f"SELECT COUNT(*) FROM memories WHERE {' AND '.join(where)}",
            params,
        )
        return int(rows[0][0])

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
        before: datetime | None = None,
    ) -> int:
        where, params = codec.memory_filters(agent_id, room_id, entity_id, kinds, before=before)
        return await self._write(
            "deleting memories", f"DELETE FROM memories WHERE {' AND '.join(where)}", params
        )

    # -- re-embedding ------------------------------------------------------------------------
    async def count_stale_embeddings(
        self, *, embedding_model: str, agent_id: str | None = None
    ) -> int:
        where, params = codec.stale_filter(embedding_model, agent_id)
        rows = await self._fetch(
            "counting stale embeddings", f"SELECT count(*) FROM memories WHERE {where}", params
        )
        return int(rows[0][0])

    async def stale_embeddings(
        self, *, embedding_model: str, agent_id: str | None = None, limit: int = 256
    ) -> list[Memory]:
        where, params = codec.stale_filter(embedding_model, agent_id)
        rows = await self._fetch(
            "reading stale embeddings",
            f"SELECT {codec.MEMORY_COLUMNS} FROM memories WHERE {where} ORDER BY seq LIMIT ?",
            [*params, max(limit, 0)],
        )
        return [codec.memory_from_row(row) for row in rows]
