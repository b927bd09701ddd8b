"""MongoDB with ``$vectorSearch`` (Atlas): detected, its index created and waited for, searches
run in the server with every filter, no in-process index. The server is SecantusDB
behind :mod:`tests.memory.atlas_search`, a loopback proxy that answers Atlas's vector search
commands by Atlas's rules; the contract suite runs against it too (``mongo-vector-search``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("pymongo", reason="pymongo is not installed: make install-dev")

from carrier.memory import _mongo_search as search
from carrier.memory.mongo import MongoStore
from carrier.types import Content, Memory, MemoryKind
from tests.mongo_servers import ProxiedMongoServer

MODEL = "m:3"
T0 = datetime(2025, 3, 1, tzinfo=UTC)


def _memory(text: str, vector: list[float], **fields: Any) -> Memory:
    values: dict[str, Any] = {
        "agent_id": "a",
        "room_id": "r",
        "entity_id": "e",
        "embedding_model": MODEL,
    } | fields
    return Memory(content=Content(text=text), embedding=vector, **values)


@pytest.fixture
def database(mongo_vector_search_server: ProxiedMongoServer) -> Iterator[str]:
    with mongo_vector_search_server.fresh_database() as name:
        yield name


@pytest.fixture
async def store(
    database: str, mongo_vector_search_server: ProxiedMongoServer
) -> AsyncIterator[MongoStore]:
    async with MongoStore.from_url(mongo_vector_search_server.database_uri(database)) as opened:
        yield opened


def _searches(server: ProxiedMongoServer, database: str) -> list[dict[str, Any]]:
    """The ``$vectorSearch`` stages the server ran for this database (not the start's probe)."""
    return [
        s
        for s in server.proxy.searches
        if s["database"] == database and s.get("index") != "carrier-capability-probe"
    ]


async def test_vector_search_is_detected_and_its_index_created_then_used(
    store: MongoStore,
    database: str,
    mongo_vector_search_server: ProxiedMongoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = mongo_vector_search_server
    assert store.supports_vector_search is True
    await store.add_memory(_memory("north", [1.0, 0.0, 0.0]))
    await store.add_memory(_memory("east", [0.0, 1.0, 0.0]))

    # The first search creates the index; Atlas builds it in the background, and until it is
    # queryable the store scores the matching vectors it reads from the database.
    hits = await store.search_memories(
        agent_id="a", embedding=[1.0, 0.1, 0.0], embedding_model=MODEL
    )
    assert [h.memory.content.text for h in hits] == ["north", "east"]
    name = search.vector_index_name(3)
    index = server.proxy.indexes[(database, "memories", name)]
    assert index["latestDefinition"] == search.vector_index_definition(3)
    assert index["type"] == "vectorSearch"
    assert _searches(server, database) == []

    server.proxy.make_ready()
    monkeypatch.setattr(search, "_VECTOR_INDEX_RECHECK_S", 0.0)
    hits = await store.search_memories(
        agent_id="a", embedding=[1.0, 0.1, 0.0], embedding_model=MODEL
    )
    assert [h.memory.content.text for h in hits] == ["north", "east"]
    assert hits[0].score == pytest.approx(0.995, abs=1e-3)  # a cosine again, not Atlas's score
    (ran,) = _searches(server, database)
    assert ran["index"] == name and ran["path"] == "embedding" and ran["limit"] == 10
    assert store.vectors is None  # no in-process index: the server searches


async def test_vector_search_runs_every_filter_in_the_server(
    store: MongoStore, database: str, mongo_vector_search_server: ProxiedMongoServer
) -> None:
    server = mongo_vector_search_server
    server.proxy.define(
        database,
        "memories",
        name=search.vector_index_name(3),
        definition=search.vector_index_definition(3),
    )
    added = {}
    rows = [
        ("a1", [1.0, 0.0, 0.0], {"room_id": "r1", "created_at": T0}),
        ("a2", [0.9, 0.1, 0.0], {"room_id": "r2", "created_at": T0 + timedelta(hours=1)}),
        ("fact", [0.95, 0.0, 0.1], {"kind": MemoryKind.FACT, "entity_id": "p"}),
        ("other agent", [1.0, 0.0, 0.0], {"agent_id": "b"}),
        ("other model", [1.0, 0.0, 0.0], {"embedding_model": "n:3"}),
    ]
    for text, vector, fields in rows:
        added[text] = await store.add_memory(_memory(text, vector, **fields))

    async def top(**options: Any) -> list[str]:
        hits = await store.search_memories(
            agent_id="a", embedding=[1.0, 0.0, 0.0], embedding_model=MODEL, **options
        )
        return [h.memory.content.text for h in hits]

    assert await top() == ["a1", "fact", "a2"]
    assert await top(room_id="r2") == ["a2"]
    assert await top(kinds=[MemoryKind.FACT]) == ["fact"]
    assert await top(entity_id="p") == ["fact"]
    assert await top(exclude_ids=[added["a1"].id]) == ["fact", "a2"]
    assert await top(since=T0 + timedelta(minutes=30), kinds=[MemoryKind.MESSAGE]) == ["a2"]
    assert await top(before=T0 + timedelta(minutes=30), kinds=[MemoryKind.MESSAGE]) == ["a1"]
    assert await top(k=1) == ["a1"]
    assert await top(min_score=0.999) == ["a1"]
    searches = _searches(server, database)
    assert len(searches) == 9  # every one of them ran in the server
    assert all(
        s["filter"]["agent_id"] == "a" and s["filter"]["embedding_model"] == MODEL for s in searches
    )

    hybrid = await store.search_hybrid(
        agent_id="a", text="fact", embedding=[0.0, 0.0, 1.0], embedding_model=MODEL, k=2
    )
    assert hybrid[0].memory.content.text == "fact"
    assert len(_searches(server, database)) == 10


async def test_vector_search_follows_updates_and_deletes_at_once(
    store: MongoStore, database: str, mongo_vector_search_server: ProxiedMongoServer
) -> None:
    mongo_vector_search_server.proxy.define(
        database,
        "memories",
        name=search.vector_index_name(3),
        definition=search.vector_index_definition(3),
    )
    moved = await store.add_memory(_memory("moved", [1.0, 0.0, 0.0]))
    gone = await store.add_memory(_memory("gone", [0.0, 1.0, 0.0]))

    async def top(vector: list[float]) -> list[str]:
        hits = await store.search_memories(
            agent_id="a", embedding=vector, embedding_model=MODEL, min_score=0.9
        )
        return [h.memory.content.text for h in hits]

    await store.update_memory(moved.model_copy(update={"embedding": [0.0, 0.0, 1.0]}))
    assert await store.delete_memory(gone.id)
    assert await top([0.0, 0.0, 1.0]) == ["moved"]
    assert await top([1.0, 0.0, 0.0]) == []
    assert await top([0.0, 1.0, 0.0]) == []
