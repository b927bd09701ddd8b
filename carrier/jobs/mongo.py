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

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from pymongo import AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
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


STORE = "MongoDB job store"
"""How errors name this store."""


class MongoJobStore(JobStore):
    """The JobStore in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`, made anew by a later :meth:`open`).
    """

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        database: str = DEFAULT_DATABASE,
        clock: Clock = system_clock,
        handle: MongoHandle | None = None,
    ) -> None:
        super().__init__(clock=clock)
        if handle is None:
            if client is None:
                raise TypeError("MongoJobStore needs a client (or use MongoJobStore.from_url)")
            handle = MongoHandle(client, database, store=STORE, opener="MongoJobStore")
        self._mongo = handle

    def __repr__(self) -> str:
        return f"MongoJobStore({self._mongo.where!r})"

    @property
    def database(self) -> str:
        return self._mongo.database

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = system_clock) -> MongoJobStore:
        """A store from a MongoDB URI; the database is the URI's path (default ``carrier``).

        Nothing is connected until :meth:`open`.
        """
        handle = MongoHandle.from_url(
            url, appname="carrier-jobs", store=STORE, opener="MongoJobStore"
        )
        return cls(handle=handle, clock=clock)

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        where = self._mongo.where
        await self._mongo.open(lambda db: migrate(db, where))

    async def close(self) -> None:
        await self._mongo.close()

    async def schema_version(self) -> int:
        db = self._mongo.db()
        with self._errors("reading the schema version"):
            return await stored_version(db)

    # -- plumbing --------------------------------------------------------------------------
    def _errors(self, what: str) -> AbstractContextManager[None]:
        """Driver errors as ``StoreError``s naming ``what`` failed, with no password in them."""
        return self._mongo.errors(what)

    def _col(self, name: str) -> AsyncCollection[Document]:
        return self._mongo.db()[name]

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
            f"{STORE} {self._mongo.where}: updating job {job_id} failed: it changed under "
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
            f"{STORE} {self._mongo.where}: saving schedule {schedule.name!r} failed: it "
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
