"""The vectors of an agent's replies, made after the replies are delivered.

Nothing in a turn reads its own reply's vector: only later turns recall it. So the evaluator
stage stores a reply without one, and once the outbox has delivered it (or failed it) the
runtime queues this job on its background work (:mod:`carrier.background`), one per room: it
embeds the room's recent replies that have no vector yet, in one batch, and writes each one's
vector. Until then a reply is simply not found by meaning (stores and the vector index skip a
memory without a vector, as they do an inbound message before its embedding).

Only replies whose delivery is over (``sent`` or ``failed``) are embedded, and only their vector
is written (``Store.set_memory_vector``), so the job cannot undo a status set meanwhile.
The job reads what is missing from the store, so a job dropped from a full queue, or lost with a
process, is caught up by the room's next delivery.
"""

from __future__ import annotations

from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.types import MemoryKind, MemoryStatus, stable_id

__all__ = ["LOOKBACK", "embed_replies"]

LOOKBACK = 20
"""How many of a room's newest delivered replies a job looks at for a missing vector."""


async def embed_replies(store: Store, embedder: Embedder, *, agent_id: str, room_id: str) -> int:
    """Embed the room's recent delivered replies that have no vector; returns how many."""
    recent = await store.get_memories(
        agent_id=agent_id,
        room_id=room_id,
        entity_id=stable_id(agent_id, "agent"),
        kinds=[MemoryKind.MESSAGE],
        statuses=[MemoryStatus.SENT, MemoryStatus.FAILED],
        limit=LOOKBACK,
        embeddings=False,
    )
    # Read without vectors: a memory that has one keeps its model's name.
    missing = [m for m in recent if m.embedding_model is None and m.content.text.strip()]
    if not missing:
        return 0
    vectors = await embedder.embed([m.content.text for m in missing])
    for memory, vector in zip(missing, vectors, strict=True):
        memory.embedding = vector.tolist()
        memory.embedding_model = embedder.model_id
        await store.set_memory_vector(memory)
    return len(missing)
