"""MongoJobStore specifics; the shared contract lives in test_store_contract.py and friends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from carrier.errors import ConfigError, StoreError
from carrier.jobs import JobState, ManualClock, transitions
from carrier.jobs._mongo_schema import INDEXES, JOBS_SCHEMA_VERSION, SCHEMA_DOC
from carrier.jobs.mongo import DEFAULT_DATABASE, MongoJobStore
from carrier.memory.mongo import SCHEMA_VERSION as MEMORY_SCHEMA_VERSION
from carrier.memory.mongo import MongoStore
from carrier.types import AgentRecord
from tests.jobs.conftest import LEASE, T0, MongoJobFactory, at, claimed
from tests.mongo_servers import _free_loopback_port


@pytest.fixture
async def mongo_jobs(
    mongo_job_factory: MongoJobFactory, clock: ManualClock
) -> AsyncIterator[MongoJobStore]:
    store = mongo_job_factory.new_store(clock)
    assert isinstance(store, MongoJobStore)
    async with store:
        yield store


# -- from_url and messages ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mongodb://localhost:27017/mine", "mine"),
        ("mongodb://localhost:27017", DEFAULT_DATABASE),
        ("mongodb://u:p@h1,h2:27018/team_db?replicaSet=rs&authSource=admin", "team_db"),
    ],
)
async def test_mongo_jobs_from_url_takes_the_database_from_the_path(
    url: str, expected: str
) -> None:
    store = MongoJobStore.from_url(url)  # no I/O until open
    assert store.database == expected
    assert ":p@" not in repr(store)
    await store.close()


@pytest.mark.parametrize("url", ["sqlite:///tmp/x.db", "localhost:27017"])
def test_mongo_jobs_from_url_rejects_other_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="CARRIER_MONGODB_URI"):
        MongoJobStore.from_url(url)


def test_mongo_jobs_from_url_hides_the_password_of_an_invalid_uri() -> None:
    with pytest.raises(ConfigError, match="CARRIER_MONGODB_URI") as caught:
        MongoJobStore.from_url("mongodb://ada:s3cr%2Ft@localhost:notaport/carrier")
    assert "s3cr" not in str(caught.value)


async def test_mongo_jobs_unreachable_server_is_a_store_error_without_password() -> None:
    port = _free_loopback_port()  # nothing listens there
    store = MongoJobStore.from_url(
        f"mongodb://ada:s3cret@127.0.0.1:{port}/carrier?serverSelectionTimeoutMS=200"
    )
    with pytest.raises(StoreError, match=f"127.0.0.1:{port}/carrier: opening failed") as caught:
        await store.open()
    assert "s3cret" not in str(caught.value)
    await store.close()


async def test_mongo_jobs_wrong_credentials_fail_with_a_hint_and_without_password(
    mongo_job_factory: MongoJobFactory,
) -> None:
    host = mongo_job_factory.uri.split("://", 1)[1].rpartition("@")[2].split("?")[0]
    store = MongoJobStore.from_url(f"mongodb://nobody:s3cret@{host}")
    with pytest.raises(StoreError, match="check the user and password") as caught:
        await store.open()
    assert "s3cret" not in str(caught.value)
    await store.close()


async def test_mongo_jobs_leave_an_injected_client_open_and_reopen_their_own(
    mongo_job_factory: MongoJobFactory, clock: ManualClock
) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_job_factory.server.uri)
    try:
        store = MongoJobStore(client=client, database=mongo_job_factory.database, clock=clock)
        async with store:
            job = await store.enqueue("k")
        assert await client[mongo_job_factory.database]["jobs"].count_documents({}) == 1
    finally:
        await client.close()
    own = mongo_job_factory.new_store(clock)
    for _ in range(2):
        async with own:
            assert await own.get(job.id) == job


async def test_mongo_jobs_store_that_is_not_open_says_so() -> None:
    store = MongoJobStore.from_url("mongodb://127.0.0.1:1/carrier")
    with pytest.raises(StoreError, match="not open"):
        await store.get("x")
    await store.close()
    await store.close()  # twice is fine


# -- schema ------------------------------------------------------------------------------------
async def test_mongo_jobs_share_a_database_with_the_memory_store(
    mongo_job_factory: MongoJobFactory, clock: ManualClock
) -> None:
    uri = mongo_job_factory.uri
    for _ in range(2):  # opening again finds everything in place
        async with MongoStore.from_url(uri) as memory, MongoJobStore.from_url(uri) as jobs:
            await memory.upsert_agent(AgentRecord(id="a1", name="Ada", character={"name": "Ada"}))
            await jobs.enqueue("k", agent_id="a1")
            assert await jobs.schema_version() == JOBS_SCHEMA_VERSION
    db = mongo_job_factory.server.client[mongo_job_factory.database]
    versions = {doc["_id"]: doc["version"] for doc in db["meta"].find()}
    assert versions == {"schema": MEMORY_SCHEMA_VERSION, SCHEMA_DOC: JOBS_SCHEMA_VERSION}
    assert {"jobs", "schedules", "meta", "agents", "memories"} <= set(db.list_collection_names())
    for name, models in INDEXES.items():
        info = db[name].index_information()
        for model in models:
            spec = model.document
            assert info[spec["name"]].get("unique", False) == spec.get("unique", False)
            assert info[spec["name"]].get("partialFilterExpression") == spec.get(
                "partialFilterExpression"
            )
    assert db["jobs"].count_documents({}) == 2


async def test_mongo_jobs_refuse_a_newer_schema(
    mongo_job_factory: MongoJobFactory, clock: ManualClock
) -> None:
    async with mongo_job_factory.new_store(clock):
        pass
    db = mongo_job_factory.server.client[mongo_job_factory.database]
    db["meta"].update_one({"_id": SCHEMA_DOC}, {"$set": {"version": JOBS_SCHEMA_VERSION + 1}})
    with pytest.raises(StoreError, match="newer than this Carrier supports"):
        async with mongo_job_factory.new_store(clock):
            pass


async def test_mongo_jobs_of_schema_1_get_a_crash_budget_on_open(
    mongo_job_factory: MongoJobFactory, clock: ManualClock
) -> None:
    async with mongo_job_factory.new_store(clock) as store:
        job = await claimed(store, "dead")
    db = mongo_job_factory.server.client[mongo_job_factory.database]
    # As Carrier with schema 1 left it: no crash fields, the job held by a worker now gone.
    db["jobs"].update_one({"_id": job.id}, {"$unset": {"crashes": "", "max_crashes": ""}})
    db["meta"].update_one({"_id": SCHEMA_DOC}, {"$set": {"version": 1}})
    clock.advance(LEASE)
    async with mongo_job_factory.new_store(clock) as store:
        assert await store.schema_version() == JOBS_SCHEMA_VERSION
        [taken] = await store.claim("w2", ["k"], lease_s=LEASE)
    assert (taken.id, taken.attempts, taken.crashes, taken.max_crashes) == (job.id, 1, 1, 10)


async def test_mongo_renewal_bumps_the_version_so_a_racing_write_reads_again(
    mongo_jobs: MongoJobStore, clock: ManualClock
) -> None:
    job = await claimed(mongo_jobs)
    db = mongo_jobs._mongo.db()
    before = (await db["jobs"].find_one({"_id": job.id}))["v"]  # type: ignore[index]
    clock.advance(5)
    await mongo_jobs.heartbeat(job.id, "w1", lease_s=LEASE)
    assert (await db["jobs"].find_one({"_id": job.id}))["v"] == before + 1  # type: ignore[index]
    started = await mongo_jobs.start(job.id, "w1")  # a read-modify-write after it keeps it
    assert started.lease_expires_at == at(5 + LEASE)


# -- layout ------------------------------------------------------------------------------------
async def test_mongo_jobs_keep_microseconds_and_any_json_payload(
    mongo_jobs: MongoJobStore,
) -> None:
    def us(n: int) -> datetime:
        return T0 + timedelta(microseconds=n)

    payload = {"$where": 1, "a.b": [2**70, "é"], "nested": {"$x": None}}
    first = await mongo_jobs.enqueue("k", payload=payload, run_at=us(1))
    second = await mongo_jobs.enqueue("k", run_at=us(3))
    assert await mongo_jobs.get(first.id) == first
    [got] = await mongo_jobs.claim("w1", ["k"], lease_s=LEASE, limit=5, now=us(2))
    assert (got.id, got.payload) == (first.id, payload)
    assert got.lease_expires_at == us(2) + timedelta(seconds=LEASE)
    [later] = await mongo_jobs.claim("w1", ["k"], lease_s=LEASE, limit=5, now=us(3))
    assert later.id == second.id


async def test_mongo_claim_is_the_claim_transition(
    mongo_jobs: MongoJobStore, clock: ManualClock
) -> None:
    # The claim is written with update operators, not with transitions.claim: both must agree.
    job = await mongo_jobs.enqueue("k", payload={"n": 1})
    [got] = await mongo_jobs.claim("w1", ["k"], lease_s=12.3456789)
    assert got == transitions.claim(job, worker_id="w1", now=T0, lease_s=12.3456789)
    assert await mongo_jobs.get(job.id) == got
    running = await mongo_jobs.start(job.id, "w1")
    clock.advance(20)  # the lease lapses: another worker takes it over
    [taken] = await mongo_jobs.claim("w2", ["k"], lease_s=LEASE)
    assert taken == transitions.claim(running, worker_id="w2", now=clock(), lease_s=LEASE)


async def test_mongo_claim_keeps_the_last_history_events(mongo_jobs: MongoJobStore) -> None:
    job = await mongo_jobs.enqueue("k", max_attempts=1)
    expected = job
    for i in range(25):  # claim, defer (the attempt given back), ... past the history limit
        [got] = await mongo_jobs.claim("w1", ["k"], lease_s=LEASE, now=at(i))
        expected = transitions.claim(expected, worker_id="w1", now=at(i), lease_s=LEASE)
        assert got == expected
        expected = await mongo_jobs.defer(job.id, "w1", until=at(i + 1), reason="q", now=at(i))


# -- concurrency limits ------------------------------------------------------------------------
@pytest.mark.parametrize("max_active", [1, 2])
async def test_mongo_racing_limited_claims_never_exceed_the_limit(
    mongo_job_factory: MongoJobFactory, clock: ManualClock, max_active: int
) -> None:
    async with mongo_job_factory.new_store(clock) as a, mongo_job_factory.new_store(clock) as b:
        for _ in range(8):
            await a.enqueue("post")
        got = await asyncio.gather(
            *(
                store.claim(f"w{i}", ["post"], lease_s=LEASE, limit=2, max_active=max_active)
                for i, store in enumerate([a, b] * 4)
            )
        )
        assert sum(len(jobs) for jobs in got) == max_active
        assert await a.count_active("post") == max_active


async def test_mongo_limited_slots_free_up_when_jobs_end_or_leases_lapse(
    mongo_jobs: MongoJobStore, clock: ManualClock
) -> None:
    for _ in range(3):
        await mongo_jobs.enqueue("post")
    [one] = await mongo_jobs.claim("w1", ["post"], lease_s=LEASE, max_active=1)
    assert await mongo_jobs.claim("w2", ["post"], lease_s=LEASE, max_active=1) == []
    await mongo_jobs.succeed(one.id, "w1")
    [two] = await mongo_jobs.claim("w2", ["post"], lease_s=LEASE, max_active=1)
    await mongo_jobs.start(two.id, "w2")
    await mongo_jobs.heartbeat(two.id, "w2", lease_s=LEASE)  # renewals keep the slot
    assert await mongo_jobs.claim("w3", ["post"], lease_s=LEASE, max_active=1) == []
    clock.advance(LEASE)  # w2 died: its slot is free, its job claimable again
    [again] = await mongo_jobs.claim("w3", ["post"], lease_s=LEASE, limit=2, max_active=1)
    assert (again.id, again.attempts, again.crashes) == (two.id, 1, 1)  # a crash, not an attempt
    assert await mongo_jobs.count_active("post") == 1


async def test_mongo_unlimited_claims_count_against_a_limit(mongo_jobs: MongoJobStore) -> None:
    await claimed(mongo_jobs, "w1", kind="post")  # a worker without a limit for "post"
    await mongo_jobs.enqueue("post")
    assert await mongo_jobs.claim("w2", ["post"], lease_s=LEASE, max_active=1) == []
    assert len(await mongo_jobs.claim("w2", ["post"], lease_s=LEASE, max_active=2)) == 1


async def test_mongo_lost_job_is_failed_once_by_racing_claims(
    mongo_job_factory: MongoJobFactory, clock: ManualClock
) -> None:
    async with mongo_job_factory.new_store(clock) as a, mongo_job_factory.new_store(clock) as b:
        job = await claimed(a, max_crashes=0)
        clock.advance(LEASE)
        got = await asyncio.gather(*(s.claim("w", ["k"], lease_s=LEASE) for s in [a, b] * 3))
        assert got == [[]] * 6
        stored = await a.get(job.id)
        assert stored is not None and stored.state is JobState.FAILED
        assert [e.state for e in stored.history].count(JobState.FAILED) == 1
