"""Memories in the MongoDB store: writes, reads by room, person and kind, deletes, stale vectors.

A memory is one document (see :mod:`carrier.memory._mongo_codec`). Each write keeps the
in-process vector index in step, and writes that change or delete vectors log them for other
processes' indexes (:mod:`carrier.memory._mongo_changes`). Reads that want text leave the vectors
unread (``embeddings=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from carrier.errors import StoreError
from carrier.memory import _mongo_codec as codec
from carrier.memory._mongo_changes import MongoChanges
from carrier.memory._mongo_conn import STORE, Document
from carrier.memory.base import RecordedTurn
from carrier.memory.index import VectorFilter
from carrier.types import Memory, MemoryKind, MemoryStatus, utcnow

__all__ = ["Memories"]

_DUPLICATE_KEY = 11000


class Memories(MongoChanges):
    """The Store's methods for memories, but search (a part of
    :class:`~carrier.memory.mongo.MongoStore`)."""

    async def add_memory(self, memory: Memory) -> Memory:
        col = self._col("memories")
        with self._errors(f"adding memory {memory.id}"):
            doc = codec.memory_doc(memory)
            try:
                await col.insert_one(doc)
            except DuplicateKeyError:
                stored = await col.find_one({"_id": memory.id})
                if stored is None:  # pragma: no cover - deleted between the two statements
                    raise StoreError(
                        f"{STORE} {self._mongo.where}: memory {memory.id} vanished on insert"
                    ) from None
                return codec.memory_from_doc(stored)
        self._index_memory(memory)
        # The document as inserted reads back as the stored memory: no second round trip.
        return codec.memory_from_doc(doc)

    async def get_memory(self, memory_id: str) -> Memory | None:
        doc = await self._find_one(f"reading memory {memory_id}", "memories", {"_id": memory_id})
        return codec.memory_from_doc(doc) if doc is not None else None

    async def update_memory(self, memory: Memory) -> None:
        col = self._col("memories")
        with self._errors(f"updating memory {memory.id}"):
            result = await col.update_one(
                {"_id": memory.id}, {"$set": codec.memory_update(memory, utcnow())}
            )
        if result.matched_count and not memory.vector_unread:
            self._index_memory(memory)
            await self._log_change(memory.agent_id, ids=[memory.id])

    async def set_memory_vector(self, memory: Memory) -> bool:
        col = self._col("memories")
        with self._errors(f"writing the vector of memory {memory.id}"):
            result = await col.update_one(
                {"_id": memory.id}, {"$set": codec.vector_update(memory, utcnow())}
            )
        if not result.matched_count:
            return False
        self._index_memory(memory)
        await self._log_change(memory.agent_id, ids=[memory.id])
        return True

    async def set_memory_status(
        self,
        memory_id: str,
        status: MemoryStatus,
        *,
        error: str | None = None,
        expect: Sequence[MemoryStatus] | None = None,
    ) -> bool:
        col = self._col("memories")
        update = {"status": str(status), "error": error, **codec.stamp("updated", utcnow())}
        query: dict[str, Any] = {"_id": memory_id}
        if expect is not None:
            if not expect:
                return False
            # One document update is atomic: the filter and the change cannot be split.
            query["status"] = {"$in": [str(s) for s in expect]}
        with self._errors(f"setting the status of memory {memory_id}"):
            result = await col.update_one(query, {"$set": update})
        return result.matched_count > 0

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
        col = self._col("memories")
        now = utcnow()
        status_set = {"status": str(status), "error": error, **codec.stamp("updated", now)}
        vector_set = codec.vector_update(message, now) if vector else {}
        with self._errors(f"recording the turn of message {message.id}"):
            stored = await self._insert_replies(col, replies)
            changed = written = False
            if expect is None or expect:
                query: Document = {"_id": message.id}
                if expect is not None:  # one document update is atomic: filter and change
                    query["status"] = {"$in": [str(s) for s in expect]}
                # The vector rides with the status when the status changes: one round trip.
                result = await col.update_one(query, {"$set": status_set | vector_set})
                changed = written = result.matched_count > 0
            if vector_set and not written:
                result = await col.update_one({"_id": message.id}, {"$set": vector_set})
                written = result.matched_count > 0
        if vector_set and written:
            self._index_memory(message)
            await self._log_change(message.agent_id, ids=[message.id])
        return RecordedTurn(stored, changed)

    async def _insert_replies(
        self, col: AsyncCollection[Document], replies: Sequence[Memory]
    ) -> list[Memory]:
        """``replies`` added in one round trip, as :meth:`add_memory` adds each; those stored
        already (a turn run again) come back as they were stored."""
        if not replies:
            return []
        docs = [codec.memory_doc(reply) for reply in replies]
        taken: set[int] = set()
        try:
            await col.insert_many(docs, ordered=False)
        except BulkWriteError as exc:
            errors: list[dict[str, Any]] = exc.details.get("writeErrors") or []
            if not errors or any(e.get("code") != _DUPLICATE_KEY for e in errors):
                raise
            taken = {int(e["index"]) for e in errors}
        earlier: dict[str, Document] = {}
        if taken:
            ids = [docs[i]["_id"] for i in taken]
            earlier = {d["_id"]: d for d in await col.find({"_id": {"$in": ids}}).to_list()}
        stored = []
        for i, (reply, doc) in enumerate(zip(replies, docs, strict=True)):
            if i not in taken:
                self._index_memory(reply)
                stored.append(codec.memory_from_doc(doc))  # as inserted: no read back
            elif doc["_id"] in earlier:
                stored.append(codec.memory_from_doc(earlier[doc["_id"]]))
        return stored

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
        query = codec.memory_filter(agent_id, room_id, entity_id, kinds, statuses, before=before)
        if query is None or limit <= 0:  # MongoDB reads limit 0 as "no limit"
            return []
        docs = await self._find(
            "reading memories",
            "memories",
            query,
            None if embeddings else {"embedding": 0},
            sort=[("created_us", -1), ("seq", -1)],
            limit=limit,
        )
        return [codec.memory_from_doc(doc) for doc in docs]

    async def count_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        since: datetime | None = None,
        entity_id: str | None = None,
    ) -> int:
        query = codec.memory_filter(agent_id, room_id, entity_id, kinds, since=since)
        if query is None:
            return 0
        col = self._col("memories")
        with self._errors("counting memories"):
            return await col.count_documents(query)

    async def delete_memory(self, memory_id: str) -> bool:
        col = self._col("memories")
        with self._errors(f"deleting memory {memory_id}"):
            deleted = await col.find_one_and_delete({"_id": memory_id}, {"agent_id": 1})
        if deleted is None:
            return False
        if self.vectors is not None:
            self.vectors.remove([memory_id], agent_id=deleted["agent_id"])
        await self._log_change(deleted["agent_id"], ids=[memory_id])
        return True

    async def delete_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        before: datetime | None = None,
    ) -> int:
        query = codec.memory_filter(agent_id, room_id, entity_id, kinds, before=before)
        if query is None:
            return 0
        col = self._col("memories")
        with self._errors("deleting memories"):
            # Their ids, for other processes' vector indexes (one inserted between the two
            # statements is deleted unlisted: their searches then just drop it when reading it).
            ids = (
                [doc["_id"] for doc in await col.find(query, {"_id": 1}).to_list()]
                if self.vectors is not None
                else []
            )
            result = await col.delete_many(query)
        await self._log_change(agent_id, ids=ids)
        if self.vectors is not None and before is not None:
            # The index keeps no times: the ids listed above are what went.
            self.vectors.remove(ids, agent_id=agent_id)
        elif self.vectors is not None:
            self.vectors.remove_matching(
                agent_id,
                VectorFilter(
                    room_id=room_id,
                    entity_id=entity_id,
                    kinds=frozenset(map(str, kinds)) if kinds is not None else None,
                ),
            )
        return result.deleted_count

    # -- re-embedding ------------------------------------------------------------------------
    async def count_stale_embeddings(
        self, *, embedding_model: str, agent_id: str | None = None
    ) -> int:
        col = self._col("memories")
        with self._errors("counting stale embeddings"):
            return await col.count_documents(self._stale_query(embedding_model, agent_id))

    async def stale_embeddings(
        self, *, embedding_model: str, agent_id: str | None = None, limit: int = 256
    ) -> list[Memory]:
        if limit <= 0:
            return []
        docs = await self._find(
            "reading stale embeddings",
            "memories",
            self._stale_query(embedding_model, agent_id),
            sort=[("seq", 1)],
            limit=limit,
        )
        return [codec.memory_from_doc(doc) for doc in docs]

    @staticmethod
    def _stale_query(embedding_model: str, agent_id: str | None) -> Document:
        query: Document = {
            "embedding_model": {"$nin": [embedding_model, None]},
            "embedding": {"$ne": None},
        }
        if agent_id is not None:
            query["agent_id"] = agent_id
        return query
