"""The Store: the repository interface for agents, rooms, entities, memories and settings.

Every implementation (SQLite, MongoDB) passes one shared contract test suite
(``tests/memory/test_store_contract.py``). Stores are async context managers::

    async with SQLiteStore(path) as store:
        await store.add_memory(memory)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, NamedTuple, Self

from carrier.types import (
    AgentRecord,
    Entity,
    Memory,
    MemoryKind,
    MemoryStatus,
    Room,
    RoomState,
    ScoredMemory,
)

__all__ = ["RecordedTurn", "Store"]


class RecordedTurn(NamedTuple):
    """What :meth:`Store.record_turn` wrote."""

    replies: list[Memory]
    """The replies as stored (one recorded already is returned as it was stored)."""
    changed: bool
    """Whether the message's status changed (as :meth:`Store.set_memory_status` says)."""


class Store(ABC):
    """Persistent state of all agents. Methods are coroutine-safe; one instance per process."""

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    async def open(self) -> None:
        """Connect, create tables/collections and indexes idempotently, run migrations."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- agents ----------------------------------------------------------------------------
    @abstractmethod
    async def upsert_agent(self, agent: AgentRecord) -> None:
        """Insert or replace the agent; an existing agent keeps its first ``created_at``."""

    @abstractmethod
    async def get_agent(self, agent_id: str) -> AgentRecord | None: ...

    @abstractmethod
    async def list_agents(self) -> list[AgentRecord]: ...

    @abstractmethod
    async def delete_agent(self, agent_id: str) -> bool:
        """Delete the agent and everything it owns (rooms, entities, participants, room states,
        memories). True if the agent existed."""

    # -- rooms, entities, participants -----------------------------------------------------
    @abstractmethod
    async def upsert_room(self, room: Room) -> None: ...

    @abstractmethod
    async def get_room(self, room_id: str) -> Room | None: ...

    async def get_rooms(self, room_ids: Sequence[str]) -> dict[str, Room]:
        """The rooms of ``room_ids`` that exist, by id. Stores read them in one query; this
        default reads them one by one."""
        rooms = {}
        for room_id in dict.fromkeys(room_ids):
            room = await self.get_room(room_id)
            if room is not None:
                rooms[room_id] = room
        return rooms

    @abstractmethod
    async def upsert_entity(self, entity: Entity) -> None:
        """Insert or update; names are merged (a person keeps every name they were seen with)."""

    @abstractmethod
    async def get_entity(self, entity_id: str) -> Entity | None: ...

    @abstractmethod
    async def find_entities(
        self,
        *,
        agent_id: str,
        platform: str | None = None,
        platform_id: str | None = None,
        name: str | None = None,
    ) -> list[Entity]:
        """The agent's entities that match every filter given, by id: how a person is found to
        be forgotten (``carrier memory forget``, ``memory people``). ``name`` matches any of the
        names a record holds (display names and usernames), ignoring case; ``platform_id``
        matches on any platform unless ``platform`` is given too. No filter: all of them."""

    @abstractmethod
    async def delete_entity(self, entity_id: str) -> bool:
        """Delete the entity record (names, platform id) and its room memberships; its memories
        are left (see :meth:`delete_memories`). True if there was a record."""

    @abstractmethod
    async def add_participant(self, room_id: str, entity_id: str) -> None:
        """Record that an entity takes part in a room (idempotent)."""

    @abstractmethod
    async def list_participants(self, room_id: str) -> list[str]:
        """Entity ids in the room."""

    @abstractmethod
    async def get_room_state(self, agent_id: str, room_id: str) -> RoomState | None:
        """The agent's own state in a room: followed, muted, or None."""

    @abstractmethod
    async def set_room_state(
        self, agent_id: str, room_id: str, state: RoomState | None
    ) -> None: ...

    # -- memories --------------------------------------------------------------------------
    @abstractmethod
    async def add_memory(self, memory: Memory) -> Memory:
        """Insert a memory. Inserting an id that exists already is a no-op returning the stored one
        (so a redelivered message is recorded once)."""

    @abstractmethod
    async def get_memory(self, memory_id: str) -> Memory | None: ...

    @abstractmethod
    async def update_memory(self, memory: Memory) -> None:
        """Replace content, embedding (and its model), status and error of an existing memory;
        bumps updated_at. A missing id is ignored (nothing is created). A memory read without
        its vector (:attr:`Memory.vector_unread`) keeps the stored one; to drop a vector, set
        both ``embedding`` and ``embedding_model`` to None."""

    @abstractmethod
    async def set_memory_vector(self, memory: Memory) -> bool:
        """Write ``memory``'s ``embedding`` and ``embedding_model`` (both None: drop its vector),
        and nothing else of it: its content and status stay as stored, so a vector made in the
        background (a delivered reply's) cannot undo a status set meanwhile. Bumps updated_at.
        True if the memory exists."""

    @abstractmethod
    async def set_memory_status(
        self,
        memory_id: str,
        status: MemoryStatus,
        *,
        error: str | None = None,
        expect: Sequence[MemoryStatus] | None = None,
    ) -> bool:
        """Set status and error (``None`` clears it); bumps updated_at. True if the memory was
        changed; a missing id is ignored (False).

        With ``expect``, only a memory whose status is one of those changes, in one atomic step
        (compare and set): of two processes claiming one reply (pending → sending), exactly one
        gets True. An empty ``expect`` changes nothing."""

    @abstractmethod
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
        """What a turn leaves in the store, in one step: ``replies`` added (each as
        :meth:`add_memory`: an id stored already keeps what was stored); with ``vector``, the
        message's ``embedding`` and ``embedding_model`` written (whatever its status; nothing
        else of it is taken from ``message``); then its status set as
        ``set_memory_status(message.id, status, error=error, expect=expect)``.

        The SQLite store writes it all in one transaction, with one hand-off to its
        connection's thread; MongoDB in that order, the replies in one round trip, the vector
        in the status's update when the status changes. A message that is gone is left gone
        (``changed`` False); the replies are stored all the same."""

    @abstractmethod
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
        """Newest first, filtered; ``before`` is exclusive. Timestamps are kept to the
        microsecond, so a page's oldest ``created_at`` is an exact cursor for the next page.
        An empty ``kinds`` or ``statuses`` matches nothing. ``embeddings=False`` leaves the
        vectors unread (``embedding`` None, ``embedding_model`` kept): the read is cheaper
        (a vector costs more to decode than the rest of its memory), for callers that only
        want the text."""

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
        """What ``get_memories(..., embeddings=False)`` returns, except that a memory of
        ``known`` (by id, as this method returned it before) that has not changed since (its
        ``updated_at``) comes back as that same object instead of being read and decoded
        again: for a caller that reads the same few memories over and over (a room's history,
        every turn) and leaves them as they are. This default reads them all again."""
        return await self.get_memories(
            agent_id=agent_id,
            room_id=room_id,
            entity_id=entity_id,
            kinds=kinds,
            limit=limit,
            embeddings=False,
        )

    @abstractmethod
    async def count_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        since: datetime | None = None,
        entity_id: str | None = None,
    ) -> int:
        """How many memories match; ``since`` (inclusive) bounds ``created_at``."""

    @abstractmethod
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
        since: datetime | None = None,
        before: datetime | None = None,
        embeddings: bool = True,
    ) -> list[ScoredMemory]:
        """Top-k by cosine similarity, best first. Only memories whose ``embedding_model`` equals
        the given one are compared (vectors of different models never mix). ``since`` (inclusive)
        and ``before`` (exclusive) bound ``created_at``. ``embeddings=False``: the memories come
        without their vectors, as from :meth:`get_memories`."""

    async def search_hybrid(
        self,
        *,
        agent_id: str,
        text: str,
        embedding: Sequence[float],
        embedding_model: str,
        k: int = 10,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        exclude_ids: Sequence[str] = (),
        since: datetime | None = None,
        before: datetime | None = None,
        embeddings: bool = True,
        min_similarity: float | None = None,
    ) -> list[ScoredMemory]:
        """Top-k by full-text relevance to ``text`` and cosine similarity to ``embedding``, fused
        by reciprocal rank fusion (:mod:`carrier.memory.hybrid`): a memory that shares a rare
        word with ``text`` ranks high even when its vector does not. ``score`` is the fused score
        (``sum(1 / (60 + rank))``), not a cosine; ``similarity`` is the cosine where the vector
        side found the memory. Filters and ``embeddings`` as in :meth:`search_memories`.
        ``min_similarity``: only the hits worth showing, those whose vector is at least that
        close or whose text holds one of ``text``'s words (:func:`~carrier.memory.hybrid.relevant`;
        the fused ranking says nothing about relevance on its own).

        This default ranks by vectors alone; the SQLite and MongoDB stores override it.
        """
        from carrier.memory.hybrid import reciprocal_rank_fusion, relevant_hits

        hits = await self.search_memories(
            agent_id=agent_id,
            embedding=embedding,
            embedding_model=embedding_model,
            k=k,
            room_id=room_id,
            entity_id=entity_id,
            kinds=kinds,
            exclude_ids=exclude_ids,
            since=since,
            before=before,
            embeddings=embeddings,
        )
        fused = dict(reciprocal_rank_fusion([[h.memory.id for h in hits]]))
        found = [
            ScoredMemory(memory=h.memory, score=fused[h.memory.id], similarity=h.score)
            for h in hits
        ]
        if min_similarity is None:
            return found
        return relevant_hits(found, text, min_cosine=min_similarity)

    async def prepare_search(  # noqa: B027 - optional hook: a no-op where nothing loads
        self, *, agent_id: str, embedding_model: str, dim: int
    ) -> None:
        """Load what searching the agent's ``embedding_model`` vectors needs (an in-memory index)
        now rather than on the first search; returns when it is ready. A no-op where nothing
        needs loading. Call it at agent start, in the background, to make the first recall fast."""

    async def catch_up(self) -> int:
        """Do now the indexing a store leaves out of its writes to keep them short (the SQLite
        store adds new memories to its full-text index of every memory in batches); returns how
        many memories it indexed. Searches catch up by themselves first: this only does it
        ahead of them (the runtime, in the background after turns). 0 where writes index at
        once."""
        return 0

    def vector_stats(self) -> list[dict[str, object]]:
        """What the in-process vector index holds, one entry per agent and model: ``agent_id``,
        ``model``, ``dim``, ``rows``, ``bytes``, ``ann`` (its ANN index is ready), ``ann_bytes``.
        Empty where nothing is held in process (a server that searches, or nothing loaded)."""
        return []

    async def count_stale_embeddings(
        self, *, embedding_model: str, agent_id: str | None = None
    ) -> int:
        """How many memories have a vector of a model other than ``embedding_model``."""
        return len(await self._stale_by_paging(embedding_model, agent_id, limit=None))

    async def stale_embeddings(
        self, *, embedding_model: str, agent_id: str | None = None, limit: int = 256
    ) -> list[Memory]:
        """Up to ``limit`` memories whose vector was made by a model other than
        ``embedding_model`` (memories without a vector are not included), oldest first; what
        :func:`carrier.memory.reindex.reindex` re-embeds."""
        return await self._stale_by_paging(embedding_model, agent_id, limit=limit)

    async def _stale_by_paging(
        self, embedding_model: str, agent_id: str | None, *, limit: int | None
    ) -> list[Memory]:
        agents = [agent_id] if agent_id is not None else [a.id for a in await self.list_agents()]
        found: list[Memory] = []
        for agent in agents:
            before: datetime | None = None
            while True:
                page = await self.get_memories(agent_id=agent, before=before, limit=500)
                found.extend(
                    m
                    for m in page
                    if m.embedding_model is not None and m.embedding_model != embedding_model
                )
                if len(page) < 500:
                    break
                before = page[-1].created_at
        found.sort(key=lambda m: m.created_at)
        return found if limit is None else found[:limit]

    @abstractmethod
    async def delete_memory(self, memory_id: str) -> bool: ...

    @abstractmethod
    async def delete_memories(
        self,
        *,
        agent_id: str,
        room_id: str | None = None,
        entity_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        before: datetime | None = None,
    ) -> int:
        """Delete matching memories; returns how many. ``before`` (exclusive) bounds
        ``created_at``: the retention job deletes what is older than a policy's days."""

    # -- settings (small key/value documents) ----------------------------------------------
    @abstractmethod
    async def get_setting(self, key: str) -> Any | None: ...

    @abstractmethod
    async def set_setting(self, key: str, value: Any) -> None:
        """Store a JSON-serializable value under a key (overwrites)."""
