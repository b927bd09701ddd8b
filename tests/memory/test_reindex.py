"""reindex(): re-embedding memories of another model, on every store backend."""

from __future__ import annotations

from typing import Any

from carrier.memory.base import Store
from carrier.memory.fake import HashEmbedder
from carrier.memory.reindex import ReindexProgress, reindex
from carrier.types import Content, Memory


def _memory(text: str, agent_id: str = "a", **fields: Any) -> Memory:
    return Memory(
        agent_id=agent_id, room_id="r", entity_id="e", content=Content(text=text), **fields
    )


async def test_reindex_re_embeds_other_models_only(store: Store) -> None:
    embedder = HashEmbedder(dim=16)
    for i in range(5):
        await store.add_memory(
            _memory(f"old note {i}", embedding=[1.0, 0.0], embedding_model="old:2")
        )
    current = await store.add_memory(
        _memory(
            "current",
            embedding=(await embedder.embed_one("current")).tolist(),
            embedding_model=embedder.model_id,
        )
    )
    bare = await store.add_memory(_memory("no vector"))
    await store.add_memory(
        _memory("other agent", agent_id="b", embedding=[1.0, 0.0], embedding_model="old:2")
    )

    seen: list[ReindexProgress] = []
    done = await reindex(store, embedder, agent_id="a", progress=seen.append, batch_size=2)

    assert done == 5
    assert seen[0] == ReindexProgress(0, 5)
    assert seen[-1] == ReindexProgress(5, 5)
    assert [p.done for p in seen] == [0, 2, 4, 5]
    assert await store.count_stale_embeddings(embedding_model=embedder.model_id, agent_id="a") == 0
    assert await store.count_stale_embeddings(embedding_model=embedder.model_id) == 1  # agent b
    query = await embedder.embed_one("old note 3")
    hits = await store.search_memories(
        agent_id="a", embedding=query.tolist(), embedding_model=embedder.model_id, k=1
    )
    assert hits[0].memory.content.text == "old note 3"
    assert hits[0].score > 0.99
    unchanged = await store.get_memory(current.id)
    assert unchanged is not None and unchanged.updated_at == current.updated_at
    still_bare = await store.get_memory(bare.id)
    assert still_bare is not None and still_bare.embedding is None

    assert await reindex(store, embedder) == 1  # every agent; then nothing is left
    assert await reindex(store, embedder) == 0
