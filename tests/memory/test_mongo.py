"""MongoDB-specific behaviour; the shared Store contract lives in test_store_contract.py."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import pytest

pytest.importorskip("pymongo", reason="pymongo is not installed: make install-dev")

from bson.binary import Binary, BinaryVectorDtype
from pymongo import AsyncMongoClient

from carrier.errors import ConfigError, StoreError
from carrier.memory import _mongo_codec as codec
from carrier.memory._mongo_schema import COLLECTIONS, INDEXES
from carrier.memory.mongo import DEFAULT_DATABASE, MongoStore
from carrier.types import Content, Entity, Memory, MemoryKind
from tests.mongo_servers import TEST_MONGODB_URI_ENV, MongoServer, _free_loopback_port

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
SERVERS = ["mongo_compatible_server"]
if os.environ.get(TEST_MONGODB_URI_ENV):
    SERVERS.append("mongo_real_server")


def _memory(text: str = "hi", **fields: object) -> Memory:
    return Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text=text), **fields)  # type: ignore[arg-type]


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> MongoServer:
    server: MongoServer = request.getfixturevalue(request.param)
    return server


@pytest.fixture
def database(server: MongoServer) -> Iterator[str]:
    """A fresh database name on the server, dropped after the test."""
    with server.fresh_database() as name:
        yield name


@pytest.fixture
async def store(server: MongoServer, database: str) -> AsyncIterator[MongoStore]:
    async with MongoStore.from_url(server.database_uri(database)) as opened:
        yield opened


# -- from_url and messages ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mongodb://localhost:27017/mine", "mine"),
        ("mongodb://localhost:27017", DEFAULT_DATABASE),
        ("mongodb://localhost:27017/", DEFAULT_DATABASE),
        ("mongodb://u:p@h1,h2:27018/team_db?replicaSet=rs&authSource=admin", "team_db"),
        ("mongodb+srv://u:p@cluster0.example.invalid/prod", "prod"),
    ],
)
async def test_mongo_from_url_takes_the_database_from_the_path(url: str, expected: str) -> None:
    store = MongoStore.from_url(url)  # no I/O yet: the network guard would fail an SRV lookup
    assert store.database == expected
    assert store.supports_vector_search is None
    await store.close()


@pytest.mark.parametrize("url", ["sqlite:///tmp/x.db", "http://localhost/x", "localhost:27017"])
def test_mongo_from_url_rejects_other_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="CARRIER_MONGODB_URI"):
        MongoStore.from_url(url)


def test_mongo_from_url_hides_the_password_of_an_invalid_uri() -> None:
    with pytest.raises(ConfigError, match="CARRIER_MONGODB_URI") as caught:
        MongoStore.from_url("mongodb://ada:s3cr%2Ft@localhost:notaport/carrier")
    assert "s3cr" not in str(caught.value)


async def test_mongo_unreachable_server_fails_with_a_store_error_without_password() -> None:
    port = _free_loopback_port()  # nothing listens there
    store = MongoStore.from_url(
        f"mongodb://ada:s3cret@127.0.0.1:{port}/carrier?serverSelectionTimeoutMS=200"
    )
    assert "s3cret" not in repr(store)
    with pytest.raises(StoreError, match=f"127.0.0.1:{port}/carrier: opening failed") as caught:
        await store.open()
    assert "s3cret" not in str(caught.value)
    await store.close()


async def test_mongo_wrong_credentials_fail_with_a_hint_and_without_password(
    server: MongoServer, database: str
) -> None:
    host = server.database_uri(database).split("://", 1)[1].rpartition("@")[2]
    store = MongoStore.from_url(f"mongodb://nobody:s3cret@{host.split('?')[0]}")
    with pytest.raises(StoreError, match="check the user and password") as caught:
        await store.open()
    assert "s3cret" not in str(caught.value)
    await store.close()


async def test_mongo_store_that_is_not_open_says_so() -> None:
    store = MongoStore.from_url("mongodb://127.0.0.1:1/carrier")
    with pytest.raises(StoreError, match="not open"):
        await store.get_memory("m")
    await store.close()


# -- schema, layout, detection -----------------------------------------------------------------


async def test_mongo_open_creates_collections_and_indexes_idempotently(
    server: MongoServer, database: str
) -> None:
    uri = server.database_uri(database)
    for _ in range(2):
        async with MongoStore.from_url(uri):
            pass

    db = server.client[database]
    assert set(COLLECTIONS) <= set(db.list_collection_names())
    for name, models in INDEXES.items():
        info = db[name].index_information()
        for model in models:
            spec = model.document
            assert spec["name"] in info, (name, spec["name"], list(info))
            assert info[spec["name"]].get("unique", False) == spec.get("unique", False)
    assert db["meta"].count_documents({}) == 1


async def test_mongo_detects_vector_search_support(
    server: MongoServer, store: MongoStore, request: pytest.FixtureRequest
) -> None:
    assert isinstance(store.supports_vector_search, bool)
    if request.node.callspec.params["server"] == "mongo_compatible_server":
        assert store.supports_vector_search is False  # SecantusDB has no $vectorSearch


async def test_mongo_stores_exact_timestamps_and_bson_vectors(
    server: MongoServer, database: str, store: MongoStore
) -> None:
    memory = await store.add_memory(
        _memory(embedding=[0.6, 0.8, 0.0], embedding_model="m:3", created_at=T0)
    )
    doc = server.client[database]["memories"].find_one({"_id": memory.id})

    assert doc["created_us"] == codec.to_us(T0)
    assert doc["created_at"].replace(tzinfo=UTC) == T0.replace(microsecond=123000)
    expected = Binary.from_vector([0.6, 0.8, 0.0], BinaryVectorDtype.FLOAT32)
    assert bytes(doc["embedding"]) == bytes(expected)
    assert (doc["embedding_model"], doc["embedding_dim"]) == ("m:3", 3)


async def test_mongo_reads_vectors_stored_as_arrays(
    server: MongoServer, database: str, store: MongoStore
) -> None:
    doc = codec.memory_doc(_memory("written by another tool"))
    doc |= {"embedding": [0.0, 1.0, 0.0], "embedding_model": "m:3", "embedding_dim": 3}
    server.client[database]["memories"].insert_one(doc)

    hits = await store.search_memories(
        agent_id="a", embedding=[0.0, 1.0, 0.0], embedding_model="m:3"
    )
    assert [h.memory.content.text for h in hits] == ["written by another tool"]
    assert hits[0].memory.embedding == pytest.approx([0.0, 1.0, 0.0])


# -- ownership, concurrency, errors ------------------------------------------------------------


async def test_mongo_leaves_an_injected_client_open(server: MongoServer, database: str) -> None:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(server.uri)
    try:
        async with MongoStore(client=client, database=database) as store:
            await store.set_setting("k", "v")
        assert await client[database]["settings"].find_one({"_id": "k"}) == {
            "_id": "k",
            "value": "v",
        }
    finally:
        await client.close()


async def test_mongo_store_reopens_after_close(server: MongoServer, database: str) -> None:
    store = MongoStore.from_url(server.database_uri(database))
    async with store:
        await store.set_setting("k", 1)
    async with store:
        assert await store.get_setting("k") == 1


async def test_mongo_concurrent_entity_upserts_keep_every_name(store: MongoStore) -> None:
    names = [f"name-{i}" for i in range(8)]
    await asyncio.gather(
        *(
            store.upsert_entity(
                Entity(id="e1", agent_id="a", platform="discord", platform_id="42", names=[n])
            )
            for n in names
        )
    )

    got = await store.get_entity("e1")
    assert got is not None
    assert sorted(got.names) == names


async def test_mongo_concurrent_participant_adds_record_once(store: MongoStore) -> None:
    await asyncio.gather(*(store.add_participant("r1", "e1") for _ in range(8)))
    assert await store.list_participants("r1") == ["e1"]


async def test_mongo_equal_timestamps_list_the_latest_insert_first(store: MongoStore) -> None:
    for text in ("first", "second", "third"):
        await store.add_memory(_memory(text, created_at=T0))
    got = await store.get_memories(agent_id="a")
    assert [m.content.text for m in got] == ["third", "second", "first"]


async def test_mongo_unencodable_memory_fails_with_a_store_error(store: MongoStore) -> None:
    memory = _memory()
    memory.content.metadata["n"] = 2**70  # BSON ints stop at 64 bits
    with pytest.raises(StoreError, match=f"adding memory {memory.id} failed"):
        await store.add_memory(memory)
    assert await store.count_memories(agent_id="a", kinds=[MemoryKind.MESSAGE]) == 0


# -- codec (no server) -------------------------------------------------------------------------


def test_mongo_codec_reads_every_vector_form() -> None:
    vector = [0.25, -1.5, 3.0]
    stored = codec.vector_value(vector)
    assert stored is not None and stored.subtype == 9
    blob = codec.vector_bytes(stored)
    assert len(blob) == 4 * len(vector)
    assert codec.vector_bytes(bytes(stored)) == blob  # from a server that dropped the subtype
    assert codec.vector_bytes(vector) == blob  # a BSON array
    assert codec.vector_matrix([stored, stored], 3).tolist() == [vector, vector]


def test_mongo_codec_stamps_keep_microseconds_and_a_millisecond_date() -> None:
    stamped = codec.stamp("created", T0)
    assert codec.from_us(stamped["created_us"]) == T0
    assert stamped["created_at"] == T0.replace(microsecond=123000)
    naive = codec.stamp("created", T0.replace(tzinfo=None))
    assert naive["created_us"] == stamped["created_us"]
