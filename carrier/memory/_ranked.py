"""Vector and hybrid search written once for the stores that rank in three steps.

A store mixes in :class:`RankedSearch` and supplies the store-specific steps: the ids and cosine
scores of the nearest vectors (:meth:`~RankedSearch._vector_hits`), the ids best matching a text
(:meth:`~RankedSearch._text_hits`), and the memories of a ranked list of ids
(:meth:`~RankedSearch._scored`). The public methods (filters, ``min_score``, fusion by reciprocal
rank) are the same for every store, so they are here.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from carrier.memory.hybrid import candidate_count, reciprocal_rank_fusion, relevant_hits
from carrier.memory.index import VectorFilter, VectorIndex
from carrier.types import MemoryKind, ScoredMemory, to_us

__all__ = ["MemoryQuery", "RankedSearch", "search_index"]


@dataclass(frozen=True)
class MemoryQuery:
    """Which of an agent's memories a search may return; ``None`` means any. ``since`` is
    inclusive, ``before`` exclusive (on ``created_at``). An empty ``kinds`` matches nothing."""

    agent_id: str
    room_id: str | None = None
    entity_id: str | None = None
    kinds: Sequence[MemoryKind] | None = None
    exclude_ids: Sequence[str] = ()
    since: datetime | None = None
    before: datetime | None = None

    @property
    def matches_nothing(self) -> bool:
        return self.kinds is not None and not self.kinds

    @property
    def scans_most_rows(self) -> bool:
        """Whether searching the database for this query reads about every vector of the agent
        (no room or person, and messages among the kinds): as many as loading the vector index
        does, so a search had better wait for a load under way than read them all again."""
        return (
            self.room_id is None
            and self.entity_id is None
            and (self.kinds is None or MemoryKind.MESSAGE in self.kinds)
        )

    def vector_filter(self) -> VectorFilter:
        """The same restriction for the in-memory vector index (the agent is its set)."""
        return VectorFilter(
            room_id=self.room_id,
            entity_id=self.entity_id,
            kinds=frozenset(map(str, self.kinds)) if self.kinds is not None else None,
            since_us=to_us(self.since) if self.since is not None else None,
            before_us=to_us(self.before) if self.before is not None else None,
            exclude_ids=frozenset(self.exclude_ids),
        )


async def search_index(
    vectors: VectorIndex,
    query: MemoryQuery,
    embedding: Sequence[float],
    embedding_model: str,
    k: int,
) -> list[tuple[str, float]] | None:
    """The top ``k`` from a store's in-memory vector index; None while it is not loaded and
    the store's own search is the better wait (see :meth:`MemoryQuery.scans_most_rows`)."""
    return await vectors.search(
        agent_id=query.agent_id,
        model=embedding_model,
        query=np.asarray(embedding, dtype=np.float32),
        k=k,
        flt=query.vector_filter(),
        wait=query.scans_most_rows,
    )


class RankedSearch:
    """``search_memories`` and ``search_hybrid`` of :class:`~carrier.memory.base.Store` over
    three store-specific steps; see the module docstring."""

    vectors: VectorIndex | None
    """The in-process vector index, where the store keeps one."""

    def vector_stats(self) -> list[dict[str, object]]:
        return self.vectors.stats() if self.vectors is not None else []

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
        query = MemoryQuery(agent_id, room_id, entity_id, kinds, exclude_ids, since, before)
        if k <= 0 or len(embedding) == 0 or query.matches_nothing:
            return []
        hits = await self._vector_hits(query, embedding, embedding_model, k)
        found = await self._scored(
            [(i, s) for i, s in hits if s >= min_score], embeddings=embeddings
        )
        for hit in found:
            hit.similarity = hit.score
        return found

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
        query = MemoryQuery(agent_id, room_id, entity_id, kinds, exclude_ids, since, before)
        if k <= 0 or query.matches_nothing:
            return []
        n = candidate_count(k)
        by_vector = (
            await self._vector_hits(query, embedding, embedding_model, n) if len(embedding) else []
        )
        by_text = await self._text_hits(query, text, n)
        fused = reciprocal_rank_fusion([[i for i, _ in by_vector], by_text], limit=k)
        cosine = dict(by_vector)
        if min_similarity is not None:
            holders = await self._word_holders(query, text, by_text, n)
            if holders is not None:
                # Which memories hold a word of the text is known: a hit too far to be shown
                # that holds none is not read.
                least = min_similarity
                fused = [(i, s) for i, s in fused if cosine.get(i, least) >= least or i in holders]
        found = await self._scored(fused, embeddings=embeddings)
        for hit in found:
            hit.similarity = cosine.get(hit.memory.id)
        if min_similarity is None:
            return found
        return relevant_hits(found, text, min_cosine=min_similarity, query=embedding)

    async def _word_holders(
        self, query: MemoryQuery, text: str, by_text: Sequence[str], limit: int
    ) -> set[str] | None:
        """The memories ``query`` allows that hold a word of ``text`` (:func:`query_terms`),
        where that is known without reading them, given ``by_text``, what :meth:`_text_hits`
        found for it with ``limit``; None where a store cannot tell."""
        return None

    @abstractmethod
    async def _vector_hits(
        self, query: MemoryQuery, embedding: Sequence[float], embedding_model: str, k: int
    ) -> list[tuple[str, float]]:
        """Ids and exact cosine scores of the ``k`` nearest ``embedding_model`` vectors of the
        ``len(embedding)`` dimensions that ``query`` allows, best first (``k`` > 0, ``embedding``
        not empty, ``query`` matches something)."""

    @abstractmethod
    async def _text_hits(self, query: MemoryQuery, text: str, limit: int) -> list[str]:
        """Ids of up to ``limit`` memories best matching ``text`` by full-text relevance."""

    @abstractmethod
    async def _scored(
        self, hits: Sequence[tuple[str, float]], *, embeddings: bool = True
    ) -> list[ScoredMemory]:
        """The memories of ``hits`` (ids and scores) in that order; deleted ones left out;
        without their vectors unless ``embeddings``."""
