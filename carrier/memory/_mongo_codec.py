"""How Carrier's records are laid out as MongoDB documents (internal to the MongoDB store).

Timestamps: BSON dates hold milliseconds, but the Store keeps microseconds (a page's oldest
``created_at`` is an exact cursor). Every timestamp is therefore stored twice: ``<name>_us``, an
int64 of microseconds since the epoch (UTC) that queries sort and compare on and that is read back,
and ``<name>_at``, a BSON date for people reading the collection (and for TTL indexes later).

Vectors: BSON binary subtype 9 (the BSON vector type) with dtype float32, the format Atlas
``$vectorSearch`` indexes read, so a later switch to it needs no migration. ``embedding_dim`` is
stored beside it so a search filters by dimension in the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from bson import ObjectId
from bson.binary import Binary

from carrier.memory.vector import from_blobs, to_blob
from carrier.types import (
    AgentRecord,
    Content,
    Entity,
    Memory,
    MemoryKind,
    MemoryStatus,
    Room,
    from_us,
    to_us,
)

__all__ = [
    "agent_from_doc",
    "agent_update",
    "entity_doc",
    "entity_from_doc",
    "from_us",
    "json_value",
    "memory_doc",
    "memory_filter",
    "memory_from_doc",
    "memory_update",
    "room_doc",
    "room_from_doc",
    "stamp",
    "to_us",
    "vector_bytes",
    "vector_matrix",
    "vector_value",
]

_VECTOR_SUBTYPE = 9
_FLOAT32_HEADER = b"\x27\x00"
"""BSON vector header: dtype float32 (0x27), no padding."""

ENTITY_REVISION = "_rev"
"""Revision counter of an entity document, for optimistic name merging."""


def stamp(name: str, value: datetime) -> dict[str, Any]:
    """Both stored forms of a timestamp: ``{name}_us`` (exact) and ``{name}_at`` (a BSON date)."""
    us = to_us(value)
    return {f"{name}_us": us, f"{name}_at": from_us(us - us % 1000)}


def json_value(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists, keys strings), like SQLite."""
    return json.loads(json.dumps(value))


# -- vectors -------------------------------------------------------------------------------------
def vector_value(embedding: Sequence[float] | None) -> Binary | None:
    """A vector as a BSON float32 vector (binary subtype 9)."""
    if embedding is None:
        return None
    return Binary(_FLOAT32_HEADER + to_blob(embedding), _VECTOR_SUBTYPE)


def vector_bytes(value: Any) -> bytes:
    """The little-endian float32 bytes of a stored vector.

    Reads what :func:`vector_value` writes, the same bytes without the subtype (some
    MongoDB-compatible servers return subtype 9 as plain binary), and plain arrays of numbers.
    """
    if isinstance(value, bytes):  # bson.Binary is a bytes subclass
        raw = bytes(value)
        # float32 data is 4n bytes; the 2-byte vector header makes it 4n + 2.
        if len(raw) % 4 == 2 and raw[:2] == _FLOAT32_HEADER:
            return raw[2:]
        return raw
    if isinstance(value, list):
        return to_blob(value)
    raise ValueError(f"not a stored vector: {type(value).__name__}")


def vector_matrix(values: Iterable[Any], dim: int) -> np.ndarray:
    """Stored vectors of ``dim`` dimensions stacked into an ``(n, dim)`` float32 matrix."""
    return from_blobs((vector_bytes(v) for v in values), dim)


# -- memories ------------------------------------------------------------------------------------
def _embedding_fields(memory: Memory) -> dict[str, Any]:
    embedding = memory.embedding
    return {
        "embedding": vector_value(embedding),
        "embedding_model": memory.embedding_model,
        "embedding_dim": len(embedding) if embedding is not None else None,
    }


def memory_doc(memory: Memory) -> dict[str, Any]:
    return {
        "_id": memory.id,
        "agent_id": memory.agent_id,
        "room_id": memory.room_id,
        "entity_id": memory.entity_id,
        "kind": str(memory.kind),
        "status": str(memory.status),
        "content": memory.content.model_dump(mode="json"),
        **_embedding_fields(memory),
        "error": memory.error,
        **stamp("created", memory.created_at),
        **stamp("updated", memory.updated_at),
        # Tie-breaker for equal created_us: increases with each insert made by one process.
        "seq": ObjectId(),
    }


def memory_update(memory: Memory, now: datetime) -> dict[str, Any]:
    """The ``$set`` of :meth:`Store.update_memory`: the mutable fields and a new updated time
    (the stored vector stays when the memory was read without it)."""
    return {
        "content": memory.content.model_dump(mode="json"),
        **({} if memory.vector_unread else _embedding_fields(memory)),
        "status": str(memory.status),
        "error": memory.error,
        **stamp("updated", now),
    }


def vector_update(memory: Memory, now: datetime) -> dict[str, Any]:
    """The ``$set`` that writes a memory's vector (and model) alone, with a new updated time."""
    return {**_embedding_fields(memory), **stamp("updated", now)}


def memory_from_doc(doc: Mapping[str, Any]) -> Memory:
    stored = doc.get("embedding")
    embedding = None
    if stored is not None:
        embedding = np.frombuffer(vector_bytes(stored), dtype="<f4").tolist()
    return Memory(
        id=doc["_id"],
        agent_id=doc["agent_id"],
        room_id=doc["room_id"],
        entity_id=doc["entity_id"],
        kind=MemoryKind(doc["kind"]),
        status=MemoryStatus(doc["status"]),
        content=Content.model_validate(doc.get("content") or {}),
        embedding=embedding,
        embedding_model=doc.get("embedding_model"),
        error=doc.get("error"),
        created_at=from_us(doc["created_us"]),
        updated_at=from_us(doc["updated_us"]),
    )


def memory_filter(
    agent_id: str,
    room_id: str | None = None,
    entity_id: str | None = None,
    kinds: Sequence[MemoryKind] | None = None,
    statuses: Sequence[MemoryStatus] | None = None,
    *,
    since: datetime | None = None,
    before: datetime | None = None,
) -> dict[str, Any] | None:
    """A query for memories; ``None`` when it matches nothing (an empty ``kinds`` or ``statuses``).
    ``since`` (inclusive) and ``before`` (exclusive) bound ``created_at``."""
    query: dict[str, Any] = {"agent_id": agent_id}
    window: dict[str, int] = {}
    if since is not None:
        window["$gte"] = to_us(since)
    if before is not None:
        window["$lt"] = to_us(before)
    if window:
        query["created_us"] = window
    if room_id is not None:
        query["room_id"] = room_id
    if entity_id is not None:
        query["entity_id"] = entity_id
    for field, values in (("kind", kinds), ("status", statuses)):
        if values is not None:
            if not values:
                return None
            query[field] = {"$in": [str(v) for v in values]}
    return query


# -- agents, rooms, entities ---------------------------------------------------------------------
def agent_update(agent: AgentRecord) -> dict[str, Any]:
    """An upsert that replaces the agent but keeps its first ``created_at``."""
    data = agent.model_dump(mode="json")
    return {
        "$set": {
            "name": agent.name,
            "character": json_value(data["character"]),
            "status": agent.status,
            **stamp("updated", agent.updated_at),
        },
        "$setOnInsert": stamp("created", agent.created_at),
    }


def agent_from_doc(doc: Mapping[str, Any]) -> AgentRecord:
    return AgentRecord(
        id=doc["_id"],
        name=doc["name"],
        character=doc.get("character") or {},
        status=doc["status"],
        created_at=from_us(doc["created_us"]),
        updated_at=from_us(doc["updated_us"]),
    )


def room_doc(room: Room) -> dict[str, Any]:
    data = room.model_dump(mode="json")
    return {"_id": data.pop("id"), **data}


def room_from_doc(doc: Mapping[str, Any]) -> Room:
    data = dict(doc)
    data["id"] = data.pop("_id")
    return Room.model_validate(data)


def entity_doc(entity: Entity, revision: int) -> dict[str, Any]:
    data = entity.model_dump(mode="json")
    return {"_id": data.pop("id"), **data, ENTITY_REVISION: revision}


def entity_from_doc(doc: Mapping[str, Any]) -> Entity:
    data = dict(doc)
    data["id"] = data.pop("_id")
    data.pop(ENTITY_REVISION, None)
    return Entity.model_validate(data)
