"""The doctor against MongoDB-compatible servers on loopback: SecantusDB (no ``$vectorSearch``)
and SecantusDB behind the Atlas-like vector search proxy of the memory tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from carrier.memory.mongo import MongoStore
from tests.doctor.conftest import World
from tests.mongo_servers import MongoServer


@pytest.fixture
def mongo_uri(mongo_compatible_server: MongoServer) -> Iterator[str]:
    with mongo_compatible_server.fresh_database() as name:
        yield mongo_compatible_server.database_uri(name)


async def test_doctor_mongo_new_database_then_set_up(world: World, mongo_uri: str) -> None:
    world.env["CARRIER_MONGODB_URI"] = mongo_uri
    world.persona("Ada")

    fresh = await world.doctor()

    (store,) = [r for r in fresh.results if r.name == "store"]
    assert fresh.exit_code == 0 and store.status == "ok"
    assert "MongoDB " in store.detail and "a new store: carrier run sets it up" in store.detail
    async with MongoStore.from_url(mongo_uri):
        pass  # what carrier run does first

    report = await world.doctor()

    (store,) = [r for r in report.results if r.name == "store"]
    assert store.status == "ok"
    assert "$vectorSearch: no (recall uses the in-process vector index)" in store.detail


async def test_doctor_mongo_with_vector_search(
    world: World, mongo_vector_search_server: MongoServer
) -> None:
    with mongo_vector_search_server.fresh_database() as name:
        uri = mongo_vector_search_server.database_uri(name)
        async with MongoStore.from_url(uri):
            pass
        world.env["CARRIER_MONGODB_URI"] = uri
        world.persona("Ada")

        report = await world.doctor()

    (store,) = [r for r in report.results if r.name == "store"]
    assert store.status == "ok" and store.detail.endswith("$vectorSearch: yes")
    assert "MongoDB " in store.detail
