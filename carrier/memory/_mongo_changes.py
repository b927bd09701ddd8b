"""The MongoDB store's in-process vector index, loaded from the server and kept in step.

On a server without ``$vectorSearch`` the store keeps each agent's vectors in an in-process
:class:`~carrier.memory.index.VectorIndex`, loaded in pages from the ``memories`` collection
(:func:`load_vectors`). This store's own writes reach it as they are made
(:meth:`MongoChanges._index_memory`). What other processes write (a worker beside the API,
``carrier memory forget``, a reindex) reaches it at most a second later, when a search polls
(:meth:`MongoChanges._poll_changes`): memories inserted since the last poll, and the
``memory_changes`` log of memories updated or deleted (each process logs its own,
:meth:`MongoChanges._log_change`; entries expire after a week, and an agent not searched for that
long loads its vectors anew).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier.memory import _mongo_codec as codec
from carrier.memory._mongo_conn import Document, MongoConnection
from carrier.memory._mongo_schema import CHANGES_TTL_S
from carrier.memory.index import Shard, VectorIndex, VectorRows
from carrier.types import Memory, utcnow

__all__ = ["MongoChanges", "load_vectors", "vectors_filter"]

_POLL_INTERVAL_S = 1.0
"""How often the in-process vector index looks for what other processes wrote."""
_POLL_SLACK_S = 10.0
"""How far back each poll looks (ObjectIds carry the inserting machine's clock, in seconds)."""
_POLL_HORIZON_S = CHANGES_TTL_S - 86_400
"""An agent not searched for longer than this reloads its vectors: the change log may have
dropped entries since its last poll."""
_CHANGE_IDS = 10_000
"""Memory ids per change log entry."""
_LOAD_BATCH = 10_000
"""Vectors read per page while loading the index."""


class MongoChanges(MongoConnection):
    """The store's in-process vector index, its loads from the server and what keeps it in step
    (a part of :class:`~carrier.memory.mongo.MongoStore`)."""

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        handle: MongoHandle | None = None,
    ) -> None:
        super().__init__(client=client, database=database, handle=handle)
        self.vectors: VectorIndex | None = None
        """The in-process vector index, on servers without ``$vectorSearch``."""
        self._polled: dict[str, float] = {}
        """Per agent: monotonic time of the last poll for other processes' writes."""
        self._writer = uuid.uuid4().hex
        """Marks this store's change log entries, which its own polls skip."""
        self._applied: dict[ObjectId, None] = {}
        """Change log entries applied, until they are older than any later poll looks."""

    def _index_memory(self, memory: Memory) -> None:
        """Keep the in-process vector index in step with a memory just written."""
        if self.vectors is None:
            return
        if memory.embedding is None or memory.embedding_model is None:
            self.vectors.remove([memory.id], agent_id=memory.agent_id)
            return
        self.vectors.upsert(
            memory.agent_id,
            memory.embedding_model,
            VectorRows(
                ids=[memory.id],
                rooms=[memory.room_id],
                entities=[memory.entity_id],
                kinds=[str(memory.kind)],
                created_us=[codec.to_us(memory.created_at)],
                vectors=np.asarray([memory.embedding], dtype=np.float32),
            ),
        )

    async def _log_change(
        self, agent_id: str, *, ids: Sequence[str] = (), dropped: bool = False
    ) -> None:
        """Tell other processes' vector indexes that these memories changed or are gone (or that
        the agent was deleted). Servers with ``$vectorSearch`` search in the server: no log."""
        if self.vectors is None or not (ids or dropped):
            return
        entry = {"agent_id": agent_id, "writer": self._writer, "at": utcnow()}
        entries = [entry | {"dropped": True}] if dropped else []
        entries += [
            entry | {"ids": list(ids[start : start + _CHANGE_IDS])}
            for start in range(0, len(ids), _CHANGE_IDS)
        ]
        with self._errors("logging changed memories"):
            await self._col("memory_changes").insert_many(entries)

    async def _poll_changes(self, agent_id: str) -> None:
        """Bring the vector index up to what other processes wrote since the last poll: the
        memories they inserted, and those the change log says they changed or deleted."""
        assert self.vectors is not None
        now = time.monotonic()
        if not self.vectors.has_agent(agent_id):
            self._polled[agent_id] = now  # this search loads everything: polls start after it
            return
        last = self._polled.setdefault(agent_id, now)
        if now - last < _POLL_INTERVAL_S:
            return
        self._polled[agent_id] = now
        if now - last > _POLL_HORIZON_S:
            self.vectors.reset(agent_id)  # the log may have lost entries: load anew
            return
        since = ObjectId.from_datetime(
            datetime.now(UTC) - timedelta(seconds=now - last + _POLL_SLACK_S)
        )
        recent = await self._find(
            "polling for new memories",
            "memories",
            {"agent_id": agent_id, "seq": {"$gte": since}},
            {"_id": 1},
        )
        # Only those new to the index are read whole: the others' inserts (its own are in step,
        # and later updates to any memory come through the change log).
        new = [doc["_id"] for doc in recent if not self.vectors.holds(agent_id, doc["_id"])]
        if new:
            for doc in await self._find("reading new memories", "memories", {"_id": {"$in": new}}):
                self._index_memory(codec.memory_from_doc(doc))
        changes = await self._find(
            "reading the change log",
            "memory_changes",
            {"agent_id": agent_id, "_id": {"$gte": since}, "writer": {"$ne": self._writer}},
            sort=[("_id", 1)],
        )
        fresh = [change for change in changes if change["_id"] not in self._applied]
        self._applied.update(dict.fromkeys(change["_id"] for change in fresh))
        # Entries older than the slack are never read again (later polls start later).
        horizon = ObjectId.from_datetime(datetime.now(UTC) - timedelta(seconds=_POLL_SLACK_S))
        for key in [key for key in self._applied if key < horizon]:
            del self._applied[key]
        if any(change.get("dropped") for change in fresh):
            self.vectors.reset(agent_id)  # the agent was deleted (and maybe made anew)
            return
        ids = list(dict.fromkeys(i for change in fresh for i in change.get("ids", ())))
        if not ids:
            return
        current = await self._find("reading changed memories", "memories", {"_id": {"$in": ids}})
        for doc in current:
            self._index_memory(codec.memory_from_doc(doc))
        present = {doc["_id"] for doc in current}
        self.vectors.remove([i for i in ids if i not in present], agent_id=agent_id)

    async def _count_vectors(self, agent_id: str, model: str, dim: int, shard: Shard) -> int:
        col = self._col("memories")
        with self._errors("counting vectors"):
            return await col.count_documents(vectors_filter(agent_id, model, dim, shard))

    async def _load_vectors(
        self, agent_id: str, model: str, dim: int, shard: Shard
    ) -> AsyncIterator[VectorRows]:
        with self._errors("loading vectors"):
            async for page in load_vectors(self._col("memories"), agent_id, model, dim, shard):
                yield page


def vectors_filter(agent_id: str, model: str, dim: int, shard: Shard) -> dict[str, Any]:
    """The agent's ``model`` vectors of ``dim`` dimensions of the kinds the shard holds."""
    query: dict[str, Any] = {"agent_id": agent_id, "embedding_model": model, "embedding_dim": dim}
    if shard.kinds is not None:
        query["kind"] = {"$in": sorted(shard.kinds)}
    return query


async def load_vectors(
    memories: AsyncCollection[Document], agent_id: str, model: str, dim: int, shard: Shard
) -> AsyncIterator[VectorRows]:
    """The agent's ``model`` vectors of ``dim`` dimensions of the shard's kinds in pages, in
    insertion order."""
    cursor = memories.find(
        vectors_filter(agent_id, model, dim, shard),
        {"_id": 1, "room_id": 1, "entity_id": 1, "kind": 1, "created_us": 1, "embedding": 1},
        sort=[("seq", 1)],
        batch_size=_LOAD_BATCH,
    )
    page: list[dict[str, Any]] = []
    async for doc in cursor:
        page.append(doc)
        if len(page) == _LOAD_BATCH:
            yield _rows(page, dim)
            page = []
    if page:
        yield _rows(page, dim)


def _rows(docs: list[dict[str, Any]], dim: int) -> VectorRows:
    return VectorRows(
        ids=[d["_id"] for d in docs],
        rooms=[d["room_id"] for d in docs],
        entities=[d["entity_id"] for d in docs],
        kinds=[d["kind"] for d in docs],
        created_us=[d["created_us"] for d in docs],
        vectors=codec.vector_matrix((d["embedding"] for d in docs), dim),
    )
