"""MongoJobStore: jobs and schedules in a MongoDB database, through PyMongo's ``AsyncMongoClient``.

Usage::

    async with MongoJobStore.from_url("mongodb://localhost:27017/carrier") as jobs:
        await jobs.enqueue("digest", agent_id=agent.id)

It may share the memory store's database (one ``CARRIER_MONGODB_URI``); see ``_mongo_schema.py``.
No transactions (a standalone server has none); every change is atomic on one document:

- **claim**: one ``find_one_and_update`` per job (filter: claimable; sort: due first; update: the
  lease), repeated up to ``limit``; two workers can never match the same job for the same lease.
  A concurrency limit (``max_active``) is kept by slots, see ``_mongo_claim.py``.
- **lease renewal**: one ``find_one_and_update`` conditional on the job's id, its owner and a
  held state; it bumps the version, so a read-modify-write racing it reads again.
- **read-modify-write** (start, succeed, fail, ...): read the job and its version ``v``, apply the
  transition in Python, write only if ``v`` is unchanged, else read again (compare-and-set).
- **schedules**: advancing is one update conditional on the ``next_at`` it expects.

The document layout is described in ``_mongo_codec.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from pymongo import AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from carrier._mongo import DEFAULT_DATABASE, connection, translated
from carrier.errors import StoreError
from carrier.jobs import _mongo_claim as claiming
from carrier.jobs import _mongo_codec as codec
from carrier.jobs._mongo_schema import JOBS_SCHEMA_VERSION, migrate, stored_version
from carrier.jobs.base import JobStore
from carrier.jobs.clock import Clock, system_clock
from carrier.jobs.errors import JobNotFound, JobStateError
from carrier.jobs.model import ACTIVE_STATES, Job, JobState
from carrier.jobs.schedule import Schedule

__all__ = ["DEFAULT_DATABASE", "JOBS_SCHEMA_VERSION", "MongoJobStore"]

logger = logging.getLogger(__name__)

WRITE_ATTEMPTS = 50
"""Compare-and-set attempts of one read-modify-write before giving up; each lost attempt means
another writer changed the document, so running out means a job changed under every read."""

Document = dict[str, Any]


class MongoJobStore(JobStore):
    """The JobStore in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`, made anew by a later :meth:`open`).
    """

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document],
        database: str,
        clock: Clock = system_clock,
    ) -> None:
        super().__init__(clock=clock)
        self.database = database
        self._client: AsyncMongoClient[Document] | None = client
        seeds = sorted(client.topology_description.server_descriptions())
        self._where = f"mongodb://{','.join(f'{h}:{p}' for h, p in seeds)}/{database}"
        self._make_client: Callable[[], AsyncMongoClient[Document]] | None = None
        """Set when the store owns its client: closed by close(), made anew by open()."""
        self._secret: str | None = None
        self._db: AsyncDatabase[Document] | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"MongoJobStore({self._where!r})"

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = system_clock) -> MongoJobStore:
        """A store from a MongoDB URI; the database is the URI's path (default ``carrier``).

        Nothing is connected until :meth:`open`.
        """
        conn = connection(url, appname="carrier-jobs")
        store = cls(client=conn.client(), database=conn.database, clock=clock)
        store._where = conn.where
        store._make_client = conn.client
        store._secret = conn.secret
        return store

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        async with self._lock:
            if self._db is not None:
                return
            if self._client is None:  # reopening after close(): only an owned client is dropped
                assert self._make_client is not None
                self._client = self._make_client()
            db = self._client[self.database]
            try:
                with self._errors("opening"):
                    await migrate(db, self._where)
            except BaseException:
                await self.close()  # a client it made does not outlive a failed open
                raise
            self._db = db

    async def close(self) -> None:
        self._db = None
        client = self._client
        if client is not None and self._make_client is not None:  # only a client it made
            self._client = None
            with self._errors("closing"):
                await client.close()

    async def schema_version(self) -> int:
        db = self._database()
        with self._errors("reading the schema version"):
            return await stored_version(db)

    # -- plumbing --------------------------------------------------------------------------
    def _errors(self, what: str) -> AbstractContextManager[None]:
        """Driver errors as ``StoreError``s naming ``what`` failed, with no password in them."""
        return translated(self._where, what, self._secret, store="MongoDB job store")

    def _database(self) -> AsyncDatabase[Document]:
        if self._db is None:
            raise StoreError(
                f"MongoDB job store {self._where} is not open; use `async with "
                "MongoJobStore.from_url(...)` or await store.open() first"
            )
        return self._db

    def _col(self, name: str) -> AsyncCollection[Document]:
        return self._database()[name]

    # -- jobs ------------------------------------------------------------------------------
    async def _insert(self, job: Job) -> Job:
        jobs = self._col("jobs")
        with self._errors(f"enqueueing a {job.kind} job"):
            try:
                await jobs.insert_one(codec.job_doc(job))
            except DuplicateKeyError:
                if job.idempotency_key is None:
                    raise  # the id itself collided (a caller reused one)
                # The key is taken, by a job committed before our insert failed: that one.
                stored = await jobs.find_one({"idempotency_key": job.idempotency_key})
                if stored is None:
                    raise
                return codec.job_from_doc(stored)
        return job

    async def _modify(self, job_id: str, change: Callable[[Job], Job]) -> Job:
        jobs = self._col("jobs")
        with self._errors(f"updating job {job_id}"):
            for _ in range(WRITE_ATTEMPTS):
                doc = await jobs.find_one({"_id": job_id})
                if doc is None:
                    raise JobNotFound(job_id)
                job = change(codec.job_from_doc(doc))
                update: Document = {"$set": codec.job_fields(job), "$inc": {codec.VERSION: 1}}
                if job.state not in ACTIVE_STATES and codec.SLOT in doc:
                    update["$unset"] = {codec.SLOT: ""}  # no longer held: the slot is free
                written = await jobs.update_one(
                    {"_id": job_id, codec.VERSION: doc[codec.VERSION]}, update
                )
                if written.matched_count:
                    return job
        raise StoreError(
            f"MongoDB job store {self._where}: updating job {job_id} failed: it changed under "
            f"each of {WRITE_ATTEMPTS} attempts; try again"
        )

    async def _renew(
        self, job_id: str, worker_id: str, *, expires: datetime, now: datetime
    ) -> Job | None:
        jobs = self._col("jobs")
        with self._errors(f"renewing the lease of job {job_id}"):
            doc = await jobs.find_one_and_update(
                {"_id": job_id, "lease_owner": worker_id, "state": {"$in": codec.HELD}},
                {
                    "$set": {
                        "lease_expires_us": codec.to_us(expires),
                        "updated_us": codec.to_us(now),
                    },
                    "$inc": {codec.VERSION: 1},
                },
                return_document=ReturnDocument.AFTER,
            )
        return codec.job_from_doc(doc) if doc is not None else None

    async def get(self, job_id: str) -> Job | None:
        jobs = self._col("jobs")
        with self._errors(f"reading job {job_id}"):
            doc = await jobs.find_one({"_id": job_id})
        return codec.job_from_doc(doc) if doc is not None else None

    async def list_jobs(
        self,
        *,
        states: Sequence[JobState] | None = None,
        kind: str | None = None,
        agent_id: str | None = None,
        limit: int | None = 100,
    ) -> list[Job]:
        if (states is not None and not states) or (limit is not None and limit <= 0):
            return []  # MongoDB reads limit 0 as "no limit"
        query: Document = {}
        if states is not None:
            query["state"] = {"$in": [str(s) for s in states]}
        if kind is not None:
            query["kind"] = kind
        if agent_id is not None:
            query["agent_id"] = agent_id
        jobs = self._col("jobs")
        with self._errors("listing jobs"):
            cursor = jobs.find(query, sort=codec.NEWEST_FIRST, limit=limit or 0)
            docs = await cursor.to_list()
        return [codec.job_from_doc(doc) for doc in docs]

    async def claim(
        self,
        worker_id: str,
        kinds: Sequence[str],
        *,
        lease_s: float,
        limit: int = 1,
        max_active: int | None = None,
        now: datetime | None = None,
    ) -> list[Job]:
        at = self._now(now)
        if not kinds or limit <= 0:
            return []
        kinds = sorted(set(kinds))
        jobs = self._col("jobs")
        with self._errors(f"ending lost {', '.join(kinds)} jobs"):
            lost = await claiming.lost_ids(jobs, kinds, at)
        for job_id in lost:
            try:
                job = await self._modify(job_id, claiming.lose(at))
            except JobStateError:
                continue
            logger.warning("job %s (%s) %s: %s", job.id, job.kind, job.state, job.last_error)
        with self._errors(f"claiming {', '.join(kinds)} jobs"):
            return await claiming.claim(
                jobs, worker_id, kinds, at=at, lease_s=lease_s, limit=limit, max_active=max_active
            )

    async def count_active(self, kind: str, *, now: datetime | None = None) -> int:
        jobs = self._col("jobs")
        with self._errors(f"counting active {kind} jobs"):
            return await jobs.count_documents(codec.active_filter([kind], self._now(now)))

    # -- schedules -------------------------------------------------------------------------
    async def put_schedule(self, schedule: Schedule) -> Schedule:
        schedules = self._col("schedules")
        now = self.clock()
        with self._errors(f"saving schedule {schedule.name!r}"):
            for _ in range(WRITE_ATTEMPTS):
                doc = await schedules.find_one({"_id": schedule.name})
                old = codec.schedule_from_doc(doc) if doc is not None else None
                if old is not None and old.definition() == schedule.definition():
                    return old
                stored = schedule.model_copy(
                    update={
                        "next_at": None,
                        "finished": False,
                        "created_at": old.created_at if old is not None else now,
                        "updated_at": now,
                    }
                )
                if doc is None:
                    try:
                        await schedules.insert_one(
                            {"_id": stored.name, **codec.schedule_doc(stored), codec.VERSION: 1}
                        )
                    except DuplicateKeyError:
                        continue  # another process saved it first: compare with theirs
                    return stored
                written = await schedules.update_one(
                    {"_id": stored.name, codec.VERSION: doc[codec.VERSION]},
                    {"$set": codec.schedule_doc(stored), "$inc": {codec.VERSION: 1}},
                )
                if written.matched_count:
                    return stored
        raise StoreError(
            f"MongoDB job store {self._where}: saving schedule {schedule.name!r} failed: it "
            f"changed under each of {WRITE_ATTEMPTS} attempts; try again"
        )

    async def get_schedule(self, name: str) -> Schedule | None:
        schedules = self._col("schedules")
        with self._errors(f"reading schedule {name!r}"):
            doc = await schedules.find_one({"_id": name})
        return codec.schedule_from_doc(doc) if doc is not None else None

    async def list_schedules(self) -> list[Schedule]:
        schedules = self._col("schedules")
        with self._errors("listing schedules"):
            docs = await schedules.find({}, sort=[("_id", 1)]).to_list()
        return [codec.schedule_from_doc(doc) for doc in docs]

    async def delete_schedule(self, name: str) -> bool:
        schedules = self._col("schedules")
        with self._errors(f"deleting schedule {name!r}"):
            deleted = await schedules.delete_one({"_id": name})
        return deleted.deleted_count > 0

    async def advance_schedule(
        self,
        name: str,
        *,
        expected: datetime | None,
        next_at: datetime | None,
        finished: bool = False,
        now: datetime | None = None,
    ) -> bool:
        schedules = self._col("schedules")
        expected_us = codec.to_us(expected) if expected is not None else None
        progress = codec.schedule_progress(next_at, finished, self._now(now))
        with self._errors(f"advancing schedule {name!r}"):
            written = await schedules.update_one(
                {"_id": name, "next_us": expected_us},
                {"$set": progress, "$inc": {codec.VERSION: 1}},
            )
        return written.matched_count > 0
