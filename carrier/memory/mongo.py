"""MongoStore: the Store in a MongoDB database, through PyMongo's ``AsyncMongoClient``.

Usage::

    async with MongoStore.from_url("mongodb://localhost:27017/carrier") as store:
        ...

Documents reference each other by id only, as in the SQLite store: a memory may be written before
its room, and :meth:`MongoStore.delete_agent` removes what an agent owns collection by collection
(not in a transaction: a standalone server has none; a failure part-way leaves the agent in place,
so deleting again finishes the job). The document layout is described in ``_mongo_codec.py``,
collections, indexes and the schema version in ``_mongo_schema.py``.

Vector search (``_mongo_search.py``): where the server runs ``$vectorSearch`` (detected on
:meth:`~MongoStore.open`, :attr:`MongoStore.supports_vector_search`) the store creates a vector
search index per dimension and searches in the server; elsewhere it keeps the agent's vectors in an
in-process :class:`~carrier.memory.index.VectorIndex`, kept in step with this store's writes.
What other processes write (a worker beside the API, ``carrier memory forget``, a reindex) reaches
that index at most a second later, when a search polls: memories inserted since the last poll, and
the ``memory_changes`` log of memories updated or deleted (each process logs its own; entries
expire after a week, and an agent not searched for that long loads its vectors anew). Full-text
search uses a text index where the server has them (:attr:`MongoStore.supports_text_search`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier.errors import StoreError
from carrier.memory import _mongo_codec as codec
from carrier.memory import _mongo_search as search
from carrier.memory._entities import entity_filters, named
from carrier.memory._mongo_schema import (
    CHANGES_TTL_S,
    SCHEMA_VERSION,
    detect_text_search,
    detect_vector_search,
    migrate,
)
from carrier.memory._ranked import MemoryQuery, RankedSearch, search_index
from carrier.memory.base import RecordedTurn, Store
from carrier.memory.index import Shard, VectorFilter, VectorIndex, VectorRows
from carrier.types import (
    AgentRecord,
    Entity,
    Memory,
    MemoryKind,
    MemoryStatus,
    Room,
    RoomState,
    ScoredMemory,
    utcnow,
)

__all__ = ["DEFAULT_DATABASE", "SCHEMA_VERSION", "MongoStore"]

logger = logging.getLogger(__name__)

_MERGE_ATTEMPTS = 20
_POLL_INTERVAL_S = 1.0
"""How often the in-process vector index looks for what other processes wrote."""
_POLL_SLACK_S = 10.0
"""How far back each poll looks (ObjectIds carry the inserting machine's clock, in seconds)."""
_POLL_HORIZON_S = CHANGES_TTL_S - 86_400
"""An agent not searched for longer than this reloads its vectors: the change log may have
dropped entries since its last poll."""
_CHANGE_IDS = 10_000
"""Memory ids per change log entry."""
_VECTOR_INDEX_RECHECK_S = 10.0
_DUPLICATE_KEY = 11000

Document = dict[str, Any]


STORE = "MongoDB store"
"""How errors name this store."""


class MongoStore(RankedSearch, Store):
    """The Store in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`, made anew by a later :meth:`open`).
    """

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        handle: MongoHandle | None = None,
    ) -> None:
        if handle is None:
            if client is None:
                raise TypeError("MongoStore needs a client (or use MongoStore.from_url)")
            handle = MongoHandle(client, database, store=STORE, opener="MongoStore")
        self._mongo = handle
        self.supports_vector_search: bool | None = None
        """Whether the server runs ``$vectorSearch``; ``None`` until :meth:`open`."""
        self.supports_text_search: bool | None = None
        """Whether the server has text indexes (``$text``); ``None`` until :meth:`open`."""
        self.vectors: VectorIndex | None = None
        """The in-process vector index, on servers without ``$vectorSearch``."""
        self._vector_index_ready: dict[int, float] = {}
        """Per dimension: when the ``$vectorSearch`` index was last seen not queryable (0: it is)."""
        self._polled: dict[str, float] = {}
        """Per agent: monotonic time of the last poll for other processes' writes."""
        self._writer = uuid.uuid4().hex
        """Marks this store's change log entries, which its own polls skip."""
        self._applied: dict[ObjectId, None] = {}
        """Change log entries applied, until they are older than any later poll looks."""

    def __repr__(self) -> str:
        return f"MongoStore({self._mongo.where!r})"

    @property
    def database(self) -> str:
        return self._mongo.database

    @classmethod
    def from_url(cls, url: str) -> MongoStore:
        """A store from a MongoDB URI; the database is the URI's path (default ``carrier``).

        Nothing is connected until :meth:`open`.
        """
        return cls(
            handle=MongoHandle.from_url(url, appname="carrier", store=STORE, opener="MongoStore")
        )

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        if not await self._mongo.open(self._prepare):
            return
        if not self.supports_vector_search:
            self.vectors = VectorIndex(load=self._load_vectors, count=self._count_vectors)
        logger.debug(
            "MongoStore %s open (vector search: %s, text search: %s)",
            self._mongo.where,
            self.supports_vector_search,
            self.supports_text_search,
        )

    async def _prepare(self, db: AsyncDatabase[Document]) -> None:
        await migrate(db, self._mongo.where)
        self.supports_vector_search = await detect_vector_search(db)
        self.supports_text_search = await detect_text_search(db)

    async def close(self) -> None:
        vectors, self.vectors = self.vectors, None
        if vectors is not None:
            await vectors.close()
        await self._mongo.close()

    # -- plumbing --------------------------------------------------------------------------
    def _errors(self, what: str) -> AbstractContextManager[None]:
        return self._mongo.errors(what)

    def _col(self, name: str) -> AsyncCollection[Document]:
        return self._mongo.db()[name]

    async def _find(
        self,
        what: str,
        collection: str,
        query: Document,
        projection: Document | None = None,
        *,
        sort: list[tuple[str, int]] | None = None,
        limit: int = 0,
    ) -> list[Document]:
        col = self._col(collection)
        with self._errors(what):
            cursor = col.find(query, projection, sort=sort, limit=limit)
            return await cursor.to_list()

    async def _find_one(self, what: str, collection: str, query: Document) -> Document | None:
        col = self._col(collection)
        with self._errors(what):
            return await col.find_one(query)

    # -- agents ----------------------------------------------------------------------------
    async def upsert_agent(self, agent: AgentRecord) -> None:
        """Insert or replace; the first ``created_at`` is kept."""
        col = self._col("agents")
        with self._errors(f"saving agent {agent.id}"):
            await col.update_one({"_id": agent.id}, codec.agent_update(agent), upsert=True)

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        doc = await self._find_one(f"reading agent {agent_id}", "agents", {"_id": agent_id})
        return codec.agent_from_doc(doc) if doc is not None else None

    async def list_agents(self) -> list[AgentRecord]:
        docs = await self._find(
            "listing agents", "agents", {}, sort=[("created_us", 1), ("_id", 1)]
        )
        return [codec.agent_from_doc(doc) for doc in docs]

    async def delete_agent(self, agent_id: str) -> bool:
        owned = {"agent_id": agent_id}
        with self._errors(f"deleting agent {agent_id}"):
            rooms = await self._col("rooms").find(owned, {"_id": 1}).to_list()
            entities = await self._col("entities").find(owned, {"_id": 1}).to_list()
            await self._col("participants").delete_many(
                {
                    "$or": [
                        {"room_id": {"$in": [d["_id"] for d in rooms]}},
                        {"entity_id": {"$in": [d["_id"] for d in entities]}},
                    ]
                }
            )
            for name in ("room_states", "memories", "rooms", "entities"):
                await self._col(name).delete_many(owned)
            # Last, so that a failure above leaves the agent to delete again.
            result = await self._col("agents").delete_one({"_id": agent_id})
        if self.vectors is not None:
            self.vectors.drop_agent(agent_id)
        await self._log_change(agent_id, dropped=True)
        return result.deleted_count > 0

    # -- rooms, entities, participants -----------------------------------------------------
    async def upsert_room(self, room: Room) -> None:
        col = self._col("rooms")
        with self._errors(f"saving room {room.id}"):
            await col.replace_one({"_id": room.id}, codec.room_doc(room), upsert=True)

    async def get_room(self, room_id: str) -> Room | None:
        doc = await self._find_one(f"reading room {room_id}", "rooms", {"_id": room_id})
        return codec.room_from_doc(doc) if doc is not None else None

    async def get_rooms(self, room_ids: Sequence[str]) -> dict[str, Room]:
        ids = list(dict.fromkeys(room_ids))
        docs = await self._find(f"reading {len(ids)} rooms", "rooms", {"_id": {"$in": ids}})
        return {doc["_id"]: codec.room_from_doc(doc) for doc in docs}

    async def upsert_entity(self, entity: Entity) -> None:
        # Read, merge the names, write back only if nobody wrote in between (a revision
        # counter), else retry: concurrent sightings of one person never lose a name.
        col = self._col("entities")
        with self._errors(f"saving entity {entity.id}"):
            for _ in range(_MERGE_ATTEMPTS):
                stored = await col.find_one({"_id": entity.id})
                if stored is None:
                    names = list(dict.fromkeys(entity.names))
                    doc = codec.entity_doc(entity.model_copy(update={"names": names}), 1)
                    try:
                        await col.insert_one(doc)
                    except DuplicateKeyError:
                        continue
                    return
                known = list(stored.get("names") or [])
                merged = known + [n for n in dict.fromkeys(entity.names) if n not in known]
                revision = stored.get(codec.ENTITY_REVISION, 0)
                doc = codec.entity_doc(entity.model_copy(update={"names": merged}), revision + 1)
                result = await col.replace_one(
                    {"_id": entity.id, codec.ENTITY_REVISION: stored.get(codec.ENTITY_REVISION)},
                    doc,
                )
                if result.matched_count:
                    return
        raise StoreError(
            f"{STORE} {self._mongo.where}: saving entity {entity.id} failed: it kept changing "
            f"under {_MERGE_ATTEMPTS} attempts to merge its names"
        )

    async def get_entity(self, entity_id: str) -> Entity | None:
        doc = await self._find_one(f"reading entity {entity_id}", "entities", {"_id": entity_id})
        return codec.entity_from_doc(doc) if doc is not None else None

    async def find_entities(
        self,
        *,
        agent_id: str,
        platform: str | None = None,
        platform_id: str | None = None,
        name: str | None = None,
    ) -> list[Entity]:
        query = entity_filters(agent_id, platform, platform_id)
        docs = await self._find(
            f"finding entities of agent {agent_id}", "entities", query, sort=[("_id", 1)]
        )
        return named(map(codec.entity_from_doc, docs), name)

    async def delete_entity(self, entity_id: str) -> bool:
        with self._errors(f"deleting entity {entity_id}"):
            # Memberships first: a failure in between leaves a record without rooms, not rooms
            # of a record that is gone.
            await self._col("participants").delete_many({"entity_id": entity_id})
            result = await self._col("entities").delete_one({"_id": entity_id})
        return result.deleted_count > 0

    async def add_participant(self, room_id: str, entity_id: str) -> None:
        col = self._col("participants")
        # A concurrent add of the same pair may win the race: it is recorded once either way.
        with (
            self._errors(f"adding entity {entity_id} to room {room_id}"),
            suppress(DuplicateKeyError),
        ):
            await col.update_one(
                {"room_id": room_id, "entity_id": entity_id},
                {"$setOnInsert": {"seq": ObjectId()}},
                upsert=True,
            )

    async def list_participants(self, room_id: str) -> list[str]:
        docs = await self._find(
            f"listing participants of room {room_id}",
            "participants",
            {"room_id": room_id},
            {"entity_id": 1, "_id": 0},
            sort=[("seq", 1)],
        )
        return [doc["entity_id"] for doc in docs]

    async def get_room_state(self, agent_id: str, room_id: str) -> RoomState | None:
        doc = await self._find_one(
            f"reading the state of room {room_id}",
            "room_states",
            {"agent_id": agent_id, "room_id": room_id},
        )
        return RoomState(doc["state"]) if doc is not None else None

    async def set_room_state(self, agent_id: str, room_id: str, state: RoomState | None) -> None:
        col = self._col("room_states")
        key = {"agent_id": agent_id, "room_id": room_id}
        with self._errors(f"setting the state of room {room_id}"):
            if state is None:
                await col.delete_one(key)
                return
            try:
                await col.update_one(key, {"$set": {"state": str(state)}}, upsert=True)
            except DuplicateKeyError:  # a concurrent upsert inserted it first: update it
                await col.update_one(key, {"$set": {"state": str(state)}})

    # -- memories --------------------------------------------------------------------------
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

    async def _vector_hits(
        self, query: MemoryQuery, embedding: Sequence[float], embedding_model: str, k: int
    ) -> list[tuple[str, float]]:
        """By ``$vectorSearch`` where the server has it, else from the vector index when it is
        loaded, else from the vectors in the database."""
        dim = len(embedding)
        where = _search_filter(query)
        memories = self._col("memories")
        with self._errors("searching memories"):
            if self.supports_vector_search and await self._vector_index_queryable(dim):
                filters = where | {"embedding_model": embedding_model}
                pipeline = search.vector_search_pipeline(filters=filters, embedding=embedding, k=k)
                docs = await (await memories.aggregate(pipeline)).to_list()
                return [(doc["_id"], float(doc["score"])) for doc in docs]
            if self.vectors is not None:
                await self._poll_changes(query.agent_id)
                found = await search_index(self.vectors, query, embedding, embedding_model, k)
                if found is not None:
                    return found
            try:
                return await search.exact_search(
                    memories, where, embedding=embedding, embedding_model=embedding_model, k=k
                )
            except ValueError as exc:
                raise StoreError(
                    f"{STORE} {self._mongo.where}: searching memories failed: a stored "
                    f"{embedding_model} vector is unreadable: {exc}"
                ) from exc

    async def _scored(
        self, hits: Sequence[tuple[str, float]], *, embeddings: bool = True
    ) -> list[ScoredMemory]:
        if not hits:
            return []
        docs = await self._find(
            "reading search results",
            "memories",
            {"_id": {"$in": [i for i, _ in hits]}},
            None if embeddings else {"embedding": 0},
        )
        by_id = {doc["_id"]: codec.memory_from_doc(doc) for doc in docs}
        return [
            ScoredMemory(memory=by_id[memory_id], score=score)
            for memory_id, score in hits
            if memory_id in by_id
        ]

    async def _text_hits(self, query: MemoryQuery, text: str, limit: int) -> list[str]:
        """By the text index's score where there is one, else by counting matched words."""
        with self._errors("searching memories by text"):
            return await search.text_hits(
                self._col("memories"),
                _search_filter(query),
                text,
                limit=limit,
                text_index=bool(self.supports_text_search),
            )

    # -- the vector index --------------------------------------------------------------------
    async def prepare_search(self, *, agent_id: str, embedding_model: str, dim: int) -> None:
        if self.supports_vector_search:
            with self._errors("preparing vector search"):
                await self._vector_index_queryable(dim)
        elif self.vectors is not None:
            await self.vectors.prepare(agent_id, embedding_model, dim)

    async def _vector_index_queryable(self, dim: int) -> bool:
        seen = self._vector_index_ready.get(dim)
        if seen == 0.0:
            return True
        now = time.monotonic()
        if seen is not None and now - seen < _VECTOR_INDEX_RECHECK_S:
            return False
        ready = await search.ensure_vector_index(self._col("memories"), dim)
        self._vector_index_ready[dim] = 0.0 if ready else now
        return ready

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
        query = search.vectors_filter(agent_id, model, dim, shard)
        with self._errors("counting vectors"):
            return await col.count_documents(query)

    async def _load_vectors(
        self, agent_id: str, model: str, dim: int, shard: Shard
    ) -> AsyncIterator[VectorRows]:
        with self._errors("loading vectors"):
            memories = self._col("memories")
            async for page in search.load_vectors(memories, agent_id, model, dim, shard):
                yield page

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

    # -- settings --------------------------------------------------------------------------
    async def get_setting(self, key: str) -> Any | None:
        doc = await self._find_one(f"reading setting {key!r}", "settings", {"_id": key})
        return doc.get("value") if doc is not None else None

    async def set_setting(self, key: str, value: Any) -> None:
        col = self._col("settings")
        stored = codec.json_value(value)
        with self._errors(f"saving setting {key!r}"):
            # $set, not a replacement: some compatible servers lose a string _id on replace+upsert.
            await col.update_one({"_id": key}, {"$set": {"value": stored}}, upsert=True)


def _search_filter(query: MemoryQuery) -> dict[str, Any]:
    """The MongoDB filter of a search (``query`` matches something)."""
    where = codec.memory_filter(
        query.agent_id,
        query.room_id,
        query.entity_id,
        query.kinds,
        since=query.since,
        before=query.before,
    )
    if where is None:  # an empty kinds
        return {"_id": {"$in": []}}
    if query.exclude_ids:
        where["_id"] = {"$nin": list(query.exclude_ids)}
    return where
