"""Search in the MongoDB store: the three steps of a ranked search, by vector and by text.

:class:`MongoSearch` gives :class:`~carrier.memory._ranked.RankedSearch` the nearest vectors,
ranked one of three ways, best first:

* ``$vectorSearch`` (Atlas, or mongod with mongot) over a vector search index per dimension
  (:func:`ensure_vector_index` makes it), filtered in the server;
* the in-process :class:`~carrier.memory.index.VectorIndex` on servers without it, polled for
  what other processes wrote (:mod:`carrier.memory._mongo_changes`);
* :func:`exact_search`: filter in MongoDB, score with numpy, while that index loads.

Text: ``$text`` over the ``memories_text`` index where the server has text indexes, else the
candidates that contain a query word (a regex per word) ranked here by a bm25-like weight.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Sequence
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier.errors import StoreError
from carrier.memory import _mongo_codec as codec
from carrier.memory._mongo_changes import MongoChanges
from carrier.memory._mongo_conn import STORE, Document
from carrier.memory._ranked import MemoryQuery, RankedSearch, search_index
from carrier.memory.hybrid import query_terms
from carrier.memory.vector import cosine_top_k
from carrier.types import ScoredMemory

__all__ = [
    "VECTOR_FILTER_FIELDS",
    "MongoSearch",
    "ensure_vector_index",
    "exact_search",
    "text_hits",
    "vector_index_name",
    "vector_search_pipeline",
]

logger = logging.getLogger(__name__)

Collection = AsyncCollection[dict[str, Any]]

VECTOR_FILTER_FIELDS = (
    "agent_id",
    "embedding_model",
    "room_id",
    "entity_id",
    "kind",
    "created_us",
    "_id",
)
"""Fields a ``$vectorSearch`` filter may name: each is declared in the search index."""

_TEXT_SCAN_LIMIT = 5_000
"""Without a text index, at most this many word-matching memories are ranked."""
_VECTOR_INDEX_RECHECK_S = 10.0
"""How long a ``$vectorSearch`` index seen not queryable yet is taken as such before asking."""


async def exact_search(
    memories: Collection,
    query: dict[str, Any],
    *,
    embedding: Sequence[float],
    embedding_model: str,
    k: int,
    exclude_ids: Sequence[str] = (),
) -> list[tuple[str, float]]:
    """Ids and cosine scores of the top-k memories matching ``query``, best first.

    Raises ValueError when a stored vector is not ``len(embedding)`` float32 values.
    """
    dim = len(embedding)
    if k <= 0 or dim == 0:
        return []
    # Same model, same dimension: vectors of different models never meet.
    query = query | {"embedding_model": embedding_model, "embedding_dim": dim}
    if exclude_ids:
        query["_id"] = {"$nin": list(exclude_ids)}
    candidates = await memories.find(query, {"_id": 1, "embedding": 1}).to_list()
    if not candidates:
        return []
    matrix = codec.vector_matrix((doc["embedding"] for doc in candidates), dim)
    indices, scores = cosine_top_k(embedding, matrix, k)
    return [
        (candidates[int(i)]["_id"], float(score)) for i, score in zip(indices, scores, strict=True)
    ]


# -- $vectorSearch -------------------------------------------------------------------------------
def vector_index_name(dim: int) -> str:
    return f"carrier_vectors_{dim}"


def vector_index_definition(dim: int) -> dict[str, Any]:
    """An Atlas vector search index over ``embedding`` with every filter field declared."""
    return {
        "fields": [
            {"type": "vector", "path": "embedding", "numDimensions": dim, "similarity": "cosine"},
            *({"type": "filter", "path": name} for name in VECTOR_FILTER_FIELDS),
        ]
    }


async def ensure_vector_index(memories: Collection, dim: int) -> bool:
    """Create the vector search index for ``dim`` if missing; whether it is queryable now.

    Atlas builds a new index in the background (seconds to minutes); until then the store
    searches in process.
    """
    name = vector_index_name(dim)
    try:
        found = await (await memories.list_search_indexes(name)).to_list()
        if not found:
            model = SearchIndexModel(
                definition=vector_index_definition(dim), name=name, type="vectorSearch"
            )
            await memories.create_search_index(model)
            logger.info("created the vector search index %s; it is being built", name)
            return False
    except OperationFailure as exc:
        logger.warning("cannot create the vector search index %s: %s", name, exc)
        return False
    return bool(found[0].get("queryable"))


def vector_search_pipeline(
    *,
    filters: dict[str, Any],
    embedding: Sequence[float],
    k: int,
    num_candidates: int | None = None,
) -> list[dict[str, Any]]:
    """A ``$vectorSearch`` pipeline returning ``{_id, score}`` with ``score`` the cosine.

    ``filters`` uses only :data:`VECTOR_FILTER_FIELDS`. Atlas reports cosine as
    ``(1 + cosine) / 2``; the pipeline maps it back.
    """
    return [
        {
            "$vectorSearch": {
                "index": vector_index_name(len(embedding)),
                "path": "embedding",
                "queryVector": [float(x) for x in embedding],
                "numCandidates": num_candidates or max(10 * k, 100),
                "limit": k,
                "filter": filters,
            }
        },
        {
            "$project": {
                "_id": 1,
                "score": {"$subtract": [{"$multiply": [{"$meta": "vectorSearchScore"}, 2]}, 1]},
            }
        },
    ]


# -- text ---------------------------------------------------------------------------------------
async def text_hits(
    memories: Collection,
    query: dict[str, Any],
    text: str,
    *,
    limit: int,
    text_index: bool,
) -> list[str]:
    """Ids of memories matching ``query`` that best match ``text``, best first."""
    terms = query_terms(text)
    if not terms or limit <= 0:
        return []
    if text_index:
        cursor = memories.find(
            query | {"$text": {"$search": " ".join(terms)}},
            {"_id": 1, "score": {"$meta": "textScore"}},
            sort=[("score", {"$meta": "textScore"})],
            limit=limit,
        )
        return [doc["_id"] async for doc in cursor]
    patterns = {term: re.compile(rf"\b{re.escape(term)}\b", re.IGNORECASE) for term in terms}
    matching = {
        "$or": [{"content.text": {"$regex": p.pattern, "$options": "i"}} for p in patterns.values()]
    }
    docs = await memories.find(
        query | matching, {"_id": 1, "content.text": 1}, limit=_TEXT_SCAN_LIMIT
    ).to_list()
    if not docs:
        return []
    texts = [str((d.get("content") or {}).get("text") or "") for d in docs]
    found = {t: [bool(p.search(x)) for x in texts] for t, p in patterns.items()}
    n = len(docs)
    weight = {
        t: math.log(1 + (n - sum(hits) + 0.5) / (sum(hits) + 0.5)) for t, hits in found.items()
    }
    scored = [
        (sum(weight[t] for t in terms if found[t][i]) / (1 + len(texts[i]) / 400), i)
        for i in range(n)
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [docs[i]["_id"] for _, i in scored[:limit]]


class MongoSearch(RankedSearch, MongoChanges):
    """``search_memories`` and ``search_hybrid`` over the MongoDB database (a part of
    :class:`~carrier.memory.mongo.MongoStore`)."""

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        handle: MongoHandle | None = None,
    ) -> None:
        super().__init__(client=client, database=database, handle=handle)
        self._vector_index_ready: dict[int, float] = {}
        """Per dimension: when the ``$vectorSearch`` index was last seen not queryable (0: it is)."""

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
                pipeline = vector_search_pipeline(filters=filters, embedding=embedding, k=k)
                docs = await (await memories.aggregate(pipeline)).to_list()
                return [(doc["_id"], float(doc["score"])) for doc in docs]
            if self.vectors is not None:
                await self._poll_changes(query.agent_id)
                found = await search_index(self.vectors, query, embedding, embedding_model, k)
                if found is not None:
                    return found
            try:
                return await exact_search(
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
            return await text_hits(
                self._col("memories"),
                _search_filter(query),
                text,
                limit=limit,
                text_index=bool(self.supports_text_search),
            )

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
        ready = await ensure_vector_index(self._col("memories"), dim)
        self._vector_index_ready[dim] = 0.0 if ready else now
        return ready


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
