"""How Carrier's records are laid out as SQLite rows (internal to the SQLite store).

Rows to records (memories, agents, vector pages for the index) and filters to SQL conditions with
their parameters. Timestamps are integer microseconds since the epoch, UTC
(:func:`~carrier.types.to_us`); a vector is a float32 blob.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from carrier.memory._ranked import MemoryQuery
from carrier.memory._sqlite_schema import MEMORY_COLUMNS_V1
from carrier.memory.index import Shard, VectorRows
from carrier.memory.vector import from_blob, from_blobs, to_blob
from carrier.types import AgentRecord, Content, Memory, MemoryKind, MemoryStatus, from_us, to_us

__all__ = [
    "MEMORY_COLUMNS",
    "MEMORY_COLUMNS_NO_VECTOR",
    "agent_from_row",
    "memory_filters",
    "memory_from_row",
    "query_filters",
    "shard_condition",
    "stale_filter",
    "vector_blob",
    "vector_rows",
]

MEMORY_COLUMNS = MEMORY_COLUMNS_V1
"""The memory columns, in the order the store writes and reads them."""
MEMORY_COLUMNS_NO_VECTOR = ", ".join(
    "NULL AS embedding" if column == "embedding" else column
    for column in MEMORY_COLUMNS.split(", ")
)
"""The memory columns with the vector left unread (``get_memories(embeddings=False)``)."""


_KINDS = {kind.value: kind for kind in MemoryKind}
_STATUSES = {status.value: status for status in MemoryStatus}
"""Stored values to members (a dict lookup; calling the enum costs ~1 us, and a turn decodes
some thirty rows)."""


def memory_from_row(row: sqlite3.Row) -> Memory:
    blob = row["embedding"]
    kind, status = row["kind"], row["status"]
    return Memory(
        id=row["id"],
        agent_id=row["agent_id"],
        room_id=row["room_id"],
        entity_id=row["entity_id"],
        kind=_KINDS.get(kind) or MemoryKind(kind),
        status=_STATUSES.get(status) or MemoryStatus(status),
        content=Content.model_validate_json(row["content"]),
        embedding=from_blob(blob).tolist() if blob is not None else None,
        embedding_model=row["embedding_model"],
        error=row["error"],
        created_at=from_us(row["created_at"]),
        updated_at=from_us(row["updated_at"]),
    )


def vector_rows(rows: Sequence[Sequence[Any]], dim: int) -> VectorRows:
    """Rows (``sqlite3.Row`` or tuples) of (seq, id, room_id, entity_id, kind, created_at,
    embedding, ...)."""
    return VectorRows(
        ids=[row[1] for row in rows],
        rooms=[row[2] for row in rows],
        entities=[row[3] for row in rows],
        kinds=[row[4] for row in rows],
        created_us=[row[5] for row in rows],
        vectors=from_blobs((row[6] for row in rows), dim),
    )


def shard_condition(shard: Shard) -> tuple[str, list[Any]]:
    """The SQL condition on model and kinds (and its parameters) for the vectors of one model a
    set holds; the model comes first among the parameters."""
    if shard.kinds is None:
        return "embedding_model = ?", []
    # ``+`` keeps the planner off the (agent, model) index, which would read every vector of the
    # agent to find a kind's few: the (agent, kind) index reads just those.
    return (
        f"+embedding_model = ? AND kind IN ({', '.join('?' * len(shard.kinds))})",
        sorted(shard.kinds),
    )


def vector_blob(embedding: Sequence[float] | None) -> bytes | None:
    return to_blob(embedding) if embedding is not None else None


def memory_filters(
    agent_id: str,
    room_id: str | None = None,
    entity_id: str | None = None,
    kinds: Sequence[MemoryKind] | None = None,
    statuses: Sequence[MemoryStatus] | None = None,
    *,
    since: datetime | None = None,
    before: datetime | None = None,
    table: str = "",
) -> tuple[list[str], list[Any]]:
    """SQL conditions and parameters; an empty ``kinds`` or ``statuses`` matches nothing.
    ``table`` prefixes the column names (for joins)."""
    where: list[str] = [f"{table}agent_id = ?"]
    params: list[Any] = [agent_id]
    if since is not None:
        where.append(f"{table}created_at >= ?")
        params.append(to_us(since))
    if before is not None:
        where.append(f"{table}created_at < ?")
        params.append(to_us(before))
    if room_id is not None:
        where.append(f"{table}room_id = ?")
        params.append(room_id)
    if entity_id is not None:
        where.append(f"{table}entity_id = ?")
        params.append(entity_id)
    for column, values in (("kind", kinds), ("status", statuses)):
        if values is not None:
            where.append(f"{table}{column} IN ({', '.join('?' * len(values))})")
            params.extend(str(v) for v in values)
    return where, params


def query_filters(query: MemoryQuery, *, table: str = "") -> tuple[list[str], list[Any]]:
    """:func:`memory_filters` of a search, with its excluded ids."""
    where, params = memory_filters(
        query.agent_id,
        query.room_id,
        query.entity_id,
        query.kinds,
        since=query.since,
        before=query.before,
        table=table,
    )
    if query.exclude_ids:
        where.append(f"{table}id NOT IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(query.exclude_ids)))
    return where, params


def agent_from_row(row: sqlite3.Row) -> AgentRecord:
    return AgentRecord(
        id=row["id"],
        name=row["name"],
        character=json.loads(row["character"]),
        status=row["status"],
        created_at=from_us(row["created_at"]),
        updated_at=from_us(row["updated_at"]),
    )


def stale_filter(embedding_model: str, agent_id: str | None) -> tuple[str, list[Any]]:
    """The SQL condition (and its parameters) on memories whose vector another model made."""
    where = "embedding IS NOT NULL AND embedding_model IS NOT NULL AND embedding_model != ?"
    params: list[Any] = [embedding_model]
    if agent_id is not None:
        where += " AND agent_id = ?"
        params.append(agent_id)
    return where, params
