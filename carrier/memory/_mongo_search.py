"""Exact vector search over the memories collection: filter in MongoDB, score with numpy.

The candidates' ids and vectors are read in one query (only memories of the same embedding model
and dimension qualify), :func:`~carrier.memory.vector.cosine_top_k` ranks them, and a second query
reads the winning memories whole. ``$vectorSearch``, where the server has it, is a later step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from carrier.memory import _mongo_codec as codec
from carrier.memory.vector import cosine_top_k
from carrier.types import ScoredMemory

__all__ = ["exact_search"]


async def exact_search(
    memories: AsyncCollection[dict[str, Any]],
    query: dict[str, Any],
    *,
    embedding: Sequence[float],
    embedding_model: str,
    k: int,
    exclude_ids: Sequence[str] = (),
    min_score: float = -1.0,
) -> list[ScoredMemory]:
    """Top-k memories matching ``query`` by cosine similarity to ``embedding``, best first.

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
    hits = {
        candidates[int(i)]["_id"]: float(score)
        for i, score in zip(indices, scores, strict=True)
        if score >= min_score
    }
    if not hits:
        return []
    docs = await memories.find({"_id": {"$in": list(hits)}}).to_list()
    by_id = {doc["_id"]: codec.memory_from_doc(doc) for doc in docs}
    # A memory deleted between the two queries is simply left out.
    return [
        ScoredMemory(memory=by_id[memory_id], score=score)
        for memory_id, score in hits.items()
        if memory_id in by_id
    ]
