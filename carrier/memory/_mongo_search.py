"""Vector and text search over the memories collection (internal to the MongoDB store).

Three ways to rank by vector, best first:

* ``$vectorSearch`` (Atlas, or mongod with mongot) over a vector search index per dimension
  (:func:`ensure_vector_index` makes it), filtered in the server;
* the in-process :class:`~carrier.memory.index.VectorIndex`, loaded with :func:`load_vectors`,
  on servers without it;
* :func:`exact_search`: filter in MongoDB, score with numpy, while that index loads.

Text: ``$text`` over the ``memories_text`` index where the server has text indexes, else the
candidates that contain a query word (a regex per word) ranked here by a bm25-like weight.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from carrier.memory import _mongo_codec as codec
from carrier.memory.hybrid import query_terms
from carrier.memory.index import Shard, VectorRows
from carrier.memory.vector import cosine_top_k

__all__ = [
    "VECTOR_FILTER_FIELDS",
    "ensure_vector_index",
    "exact_search",
    "load_vectors",
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

_LOAD_BATCH = 10_000
_TEXT_SCAN_LIMIT = 5_000
"""Without a text index, at most this many word-matching memories are ranked."""


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


def vectors_filter(agent_id: str, model: str, dim: int, shard: Shard) -> dict[str, Any]:
    """The agent's ``model`` vectors of ``dim`` dimensions of the kinds the shard holds."""
    query: dict[str, Any] = {"agent_id": agent_id, "embedding_model": model, "embedding_dim": dim}
    if shard.kinds is not None:
        query["kind"] = {"$in": sorted(shard.kinds)}
    return query


async def load_vectors(
    memories: Collection, agent_id: str, model: str, dim: int, shard: Shard
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
