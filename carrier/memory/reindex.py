"""Re-embedding memories whose vectors another model made (``carrier memory reindex``).

Searches compare only vectors of one model, so after a change of embedding model the memories
embedded by the old one are invisible to recall until they are re-embedded. :func:`reindex` does
that in batches, oldest first, and reports progress; it can be stopped and run again (it picks up
what is left), and runs beside a live agent (each memory is updated on its own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from carrier.memory.base import Store
from carrier.memory.embedder import Embedder

__all__ = ["ReindexProgress", "reindex"]

DEFAULT_BATCH = 128


@dataclass(frozen=True, slots=True)
class ReindexProgress:
    """Where a reindex stands: ``done`` of ``total`` memories re-embedded."""

    done: int
    total: int


ProgressCallback = Callable[[ReindexProgress], None]


async def reindex(
    store: Store,
    embedder: Embedder,
    *,
    agent_id: str | None = None,
    progress: ProgressCallback | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> int:
    """Re-embed every memory (of ``agent_id``, or of all agents) whose ``embedding_model`` is set
    and differs from ``embedder.model_id``; returns how many were re-embedded.

    Memories stored without a vector are left as they are. ``progress`` is called after each
    batch (and once at the start with ``done=0``).
    """
    model = embedder.model_id
    total = await store.count_stale_embeddings(embedding_model=model, agent_id=agent_id)
    done = 0
    if progress is not None:
        progress(ReindexProgress(done, total))
    seen: set[str] = set()
    while True:
        batch = await store.stale_embeddings(
            embedding_model=model, agent_id=agent_id, limit=batch_size
        )
        batch = [m for m in batch if m.id not in seen]  # an update that did not take: skip it
        if not batch:
            break
        vectors = await embedder.embed([m.content.text for m in batch])
        for memory, vector in zip(batch, vectors, strict=True):
            seen.add(memory.id)
            await store.update_memory(
                memory.model_copy(update={"embedding": vector.tolist(), "embedding_model": model})
            )
        done += len(batch)
        if progress is not None:
            progress(ReindexProgress(done, max(total, done)))
    return done
