"""MongoDB recall: the in-process vector index on servers without $vectorSearch (kept in step,
including other processes' inserts), text search with or without a text index, and the
$vectorSearch pipeline for servers that have it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest

pytest.importorskip("pymongo", reason="pymongo is not installed: make install-dev")

from carrier.memory import _mongo_changes as changes_module
from carrier.memory import _mongo_search as search
from carrier.memory.mongo import MongoStore
from carrier.types import Content, Memory
from tests.mongo_servers import MongoServer

MODEL = "m:3"


def _memory(text: str, vector: list[float], **fields: object) -> Memory:
    values: dict[str, object] = {"agent_id": "a", "room_id": "r", "entity_id": "e"} | fields
    return Memory(
        content=Content(text=text),
        embedding=vector,
        embedding_model=MODEL,
        **values,  # type: ignore[arg-type]
    )


@pytest.fixture
def database_uri(mongo_compatible_server: MongoServer) -> Iterator[str]:
    with mongo_compatible_server.fresh_database() as name:
        yield mongo_compatible_server.database_uri(name)


@pytest.fixture
async def store(database_uri: str) -> AsyncIterator[MongoStore]:
    async with MongoStore.from_url(database_uri) as opened:
        yield opened


async def test_mongo_uses_the_in_process_index_without_vector_search(store: MongoStore) -> None:
    assert store.supports_vector_search is False
    assert store.vectors is not None
    await store.add_memory(_memory("x", [1.0, 0.0, 0.0]))
    hits = await store.search_memories(
        agent_id="a", embedding=[1.0, 0.0, 0.0], embedding_model=MODEL
    )
    assert [h.memory.content.text for h in hits] == ["x"]
    assert store.vectors.loaded("a", MODEL, 3)


async def test_mongo_index_sees_other_processes_inserts(
    database_uri: str, store: MongoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes_module, "_POLL_INTERVAL_S", 0.0)
    await store.add_memory(_memory("mine", [1.0, 0.0, 0.0]))
    assert (
        len(await store.search_memories(agent_id="a", embedding=[0, 1.0, 0], embedding_model=MODEL))
        == 1
    )
    assert store.vectors is not None
    indexed: list[str] = []
    upsert = store.vectors.upsert
    monkeypatch.setattr(
        store.vectors, "upsert", lambda a, m, rows: (indexed.extend(rows.ids), upsert(a, m, rows))
    )
    async with MongoStore.from_url(database_uri) as other:
        theirs = await other.add_memory(_memory("theirs", [0.0, 1.0, 0.0]))
    hits = await store.search_memories(
        agent_id="a", embedding=[0.0, 1.0, 0.0], embedding_model=MODEL, k=1
    )
    assert [h.memory.content.text for h in hits] == ["theirs"]
    # Polls look back a while; what the index holds already (its own) is not indexed again.
    await store.search_memories(agent_id="a", embedding=[0, 1.0, 0], embedding_model=MODEL)
    assert indexed == [theirs.id]


async def test_mongo_index_sees_other_processes_updates_and_deletions(
    database_uri: str, store: MongoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes_module, "_POLL_INTERVAL_S", 0.0)
    moves = await store.add_memory(_memory("moves", [1.0, 0.0, 0.0]))
    goes = await store.add_memory(_memory("goes", [0.0, 1.0, 0.0]))
    room = await store.add_memory(_memory("in r2", [0.0, 0.7, 0.7], room_id="r2"))
    stays = await store.add_memory(_memory("stays", [0.6, 0.8, 0.0]))
    await store.search_memories(agent_id="a", embedding=[1.0, 0, 0], embedding_model=MODEL)
    assert store.vectors is not None

    async def indexed(query: list[float]) -> dict[str, float]:
        assert store.vectors is not None
        hits = await store.vectors.search(
            agent_id="a", model=MODEL, query=np.array(query, dtype=np.float32), k=10
        )
        assert hits is not None
        return {memory_id: round(score, 3) for memory_id, score in hits}

    assert set(await indexed([0, 1.0, 0])) == {moves.id, goes.id, room.id, stays.id}
    async with MongoStore.from_url(database_uri) as other:  # another process
        await other.update_memory(moves.model_copy(update={"embedding": [0.0, 0.0, 1.0]}))
        assert await other.delete_memory(goes.id)
        assert await other.delete_memories(agent_id="a", room_id="r2") == 1
    # The next search polls: the moved vector is searched where it is now, the deleted are gone.
    hits = await store.search_memories(
        agent_id="a", embedding=[0.0, 0.0, 1.0], embedding_model=MODEL, k=1
    )
    assert [h.memory.content.text for h in hits] == ["moves"]
    assert await indexed([0, 0, 1.0]) == {moves.id: 1.0, stays.id: 0.0}
    # Its own writes are in step already; the log's entries are for the others.
    await store.update_memory(stays.model_copy(update={"embedding": [0.0, 0.0, 1.0]}))
    assert await indexed([0, 0, 1.0]) == {moves.id: 1.0, stays.id: 1.0}


async def test_mongo_index_reloads_after_another_process_deletes_the_agent(
    database_uri: str, store: MongoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes_module, "_POLL_INTERVAL_S", 0.0)
    await store.add_memory(_memory("old life", [1.0, 0.0, 0.0]))
    await store.search_memories(agent_id="a", embedding=[1.0, 0, 0], embedding_model=MODEL)
    async with MongoStore.from_url(database_uri) as other:
        await other.delete_agent("a")
        await other.add_memory(_memory("new life", [1.0, 0.0, 0.0]))
    hits = await store.search_memories(agent_id="a", embedding=[1.0, 0, 0], embedding_model=MODEL)
    assert [h.memory.content.text for h in hits] == ["new life"]
    assert store.vectors is not None and store.vectors.loaded("a", MODEL, 3)
    assert len(await store.vectors.search(agent_id="a", model=MODEL, query=np.ones(3), k=5)) == 1


async def test_mongo_index_idle_past_the_change_log_reloads(
    store: MongoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes_module, "_POLL_INTERVAL_S", 0.0)
    await store.add_memory(_memory("x", [1.0, 0.0, 0.0]))
    await store.search_memories(agent_id="a", embedding=[1.0, 0, 0], embedding_model=MODEL)
    assert store.vectors is not None and store.vectors.has_agent("a")
    monkeypatch.setattr(changes_module, "_POLL_HORIZON_S", -1.0)  # as if idle past the log
    hits = await store.search_memories(agent_id="a", embedding=[1.0, 0, 0], embedding_model=MODEL)
    assert [h.memory.content.text for h in hits] == ["x"]  # read again from the database


async def test_mongo_text_search_without_a_text_index(store: MongoStore) -> None:
    assert store.supports_text_search is False  # SecantusDB has no text indexes
    for text in ["the otter swims", "an otter and a heron", "nothing here", "OTTER!"]:
        await store.add_memory(_memory(text, [1.0, 0.0, 0.0]))
    found = await search.text_hits(
        store._col("memories"), {"agent_id": "a"}, "otter heron", limit=10, text_index=False
    )
    texts = [(await store.get_memory(i)).content.text for i in found]  # type: ignore[union-attr]
    assert texts[0] == "an otter and a heron"
    assert sorted(texts) == sorted(["the otter swims", "an otter and a heron", "OTTER!"])


def test_mongo_vector_search_pipeline_maps_scores_back_to_cosine() -> None:
    pipeline = search.vector_search_pipeline(
        filters={"agent_id": "a", "embedding_model": MODEL}, embedding=[0.5, 0.5, 0.0], k=5
    )
    stage = pipeline[0]["$vectorSearch"]
    assert stage["index"] == "carrier_vectors_3"
    assert stage["path"] == "embedding"
    assert (stage["limit"], stage["numCandidates"]) == (5, 100)
    assert stage["filter"] == {"agent_id": "a", "embedding_model": MODEL}
    assert pipeline[1]["$project"]["score"] == {
        "$subtract": [{"$multiply": [{"$meta": "vectorSearchScore"}, 2]}, 1]
    }
    definition = search.vector_index_definition(3)
    paths = {f["path"] for f in definition["fields"] if f["type"] == "filter"}
    assert paths == set(search.VECTOR_FILTER_FIELDS)
    assert definition["fields"][0]["numDimensions"] == 3
