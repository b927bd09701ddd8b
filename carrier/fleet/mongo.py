"""MongoFleetStore: the fleet as collections of the MongoDB database the store uses.

Usage::

    async with MongoFleetStore.from_url("mongodb://localhost:27017/carrier") as fleet:
        await fleet.set_desired("harbor", DesiredState.RUNNING)

It shares the memory store's database (see ``_mongo_schema.py`` for the collections). No
transactions (a standalone server has none); what must be atomic is one document's write:

- **numbers**: a revision is inserted as head + 1 and a change as the newest ``seq`` + 1, under a
  unique key (``(agent_id, number)``; the change's ``_id``); an insert that loses a race gets a
  duplicate key error and numbers again. With ``expected_head``, a moved head is a
  :class:`~carrier.fleet.base.RevisionConflict` instead.
- **the change log has no gaps.** A seq is taken by the insert that writes the entry, never
  before: an entry can only be numbered ``n + 1`` once entry ``n`` is written and visible. So a
  follower that has read up to ``n`` has seen every entry up to ``n``, and never skips one that
  is still on its way, with no waiting at gaps and no guess of how old a gap must be before it
  is given up (a counter document incremented first would hand out seqs whose entries may land
  late, or never when the writer dies in between). The cost is a retry when two processes log
  at the same instant, which the low rate of this log (edits, starts, stops) makes rare.
- **leases**: one ``find_one_and_update`` whose filter matches the lease only when it is free,
  expired or the caller's own, with upsert: when another owner holds it unexpired, the filter
  matches nothing, the upsert's insert collides with the lease's ``_id`` and the caller gets
  None.
- A revision, a desired state or a deletion is written first and its change after: a process
  that dies in between leaves the write without its change, which the followers' periodic sweep
  of the desired states (not this store) catches; never a change without its write.

Followers are woken by a change stream on ``fleet_changes`` when the server has them (a replica
set; see ``_mongo_stream.py``), else they poll every :attr:`~carrier.fleet.base.FleetStore.poll_s`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, TypeVar

from pymongo import DESCENDING, AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from carrier._mongo import DEFAULT_DATABASE, MongoHandle
from carrier.errors import StoreError
from carrier.fleet import _mongo_codec as codec
from carrier.fleet._mongo_schema import (
    CHANGES,
    DESIRED,
    FLEET_SCHEMA_VERSION,
    IMPORTS,
    LEASES,
    REVISIONS,
    migrate,
    stored_version,
)
from carrier.fleet._mongo_stream import BACKSTOP_S, ChangeStreamBell
from carrier.fleet._wake import Bell, wait_changes
from carrier.fleet.base import UNCHANGED, FleetStore, RevisionConflict
from carrier.fleet.model import (
    Change,
    ChangeKind,
    Desired,
    DesiredState,
    ImportMark,
    Lease,
    Revision,
    RevisionSource,
    character_digest,
)
from carrier.jobs.clock import Clock, system_clock
from carrier.types import from_us, to_us

__all__ = ["DEFAULT_DATABASE", "FLEET_SCHEMA_VERSION", "MongoFleetStore"]

log = logging.getLogger(__name__)

Document = dict[str, Any]
T = TypeVar("T")

STORE = "MongoDB fleet store"
"""How errors name this store."""

WRITE_ATTEMPTS = 100
"""Inserts of one numbered document before giving up; each lost one means another process
numbered one meanwhile."""


class MongoFleetStore(FleetStore):
    """The FleetStore in one MongoDB database.

    Takes an ``AsyncMongoClient`` that the caller owns (and closes), or builds its own with
    :meth:`from_url` (closed by :meth:`close`, made anew by a later :meth:`open`).
    """

    stream_backstop_s: float = BACKSTOP_S
    """How often a waiter reads the log while a change stream is up, in case it missed one."""

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
                raise TypeError("MongoFleetStore needs a client (or use MongoFleetStore.from_url)")
            handle = MongoHandle(client, database, store=STORE, opener="MongoFleetStore")
        self._mongo = handle
        self._bell = Bell()
        self._stream: ChangeStreamBell | None = None

    def __repr__(self) -> str:
        return f"MongoFleetStore({self._mongo.where!r})"

    @property
    def database(self) -> str:
        return self._mongo.database

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = system_clock) -> MongoFleetStore:
        """A store from a MongoDB URI; the database is the URI's path (default ``carrier``).
        Nothing is connected until :meth:`open`."""
        handle = MongoHandle.from_url(
            url, appname="carrier-fleet", store=STORE, opener="MongoFleetStore"
        )
        return cls(handle=handle, clock=clock)

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect and migrate, then follow the change log by change stream if the server
        offers one (checked once, here)."""
        where = self._mongo.where
        if not await self._mongo.open(lambda db: migrate(db, where)):
            return
        stream = ChangeStreamBell(
            collection=lambda: self._col(CHANGES),
            bell=self._bell,
            errors=self._errors,
            where=where,
        )
        if await stream.start():
            self._stream = stream

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()
        await self._mongo.close()

    @property
    def follows_change_stream(self) -> bool:
        """True while a change stream wakes this store's waiters (else they poll)."""
        return self._stream is not None and self._stream.live

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

    def _now_us(self) -> int:
        return to_us(self.clock())

    async def _numbered(self, what: str, attempt: Callable[[], Awaitable[T | None]]) -> T:
        """Run ``attempt`` (which numbers and inserts one document, None when its insert lost
        a race) until it wins."""
        for _ in range(WRITE_ATTEMPTS):
            with self._errors(what):
                done = await attempt()
            if done is not None:
                return done
        raise StoreError(
            f"{STORE} {self._mongo.where}: {what} failed: another process took the number "
            f"each of {WRITE_ATTEMPTS} times; try again"
        )

    async def _log(self, kind: ChangeKind, agent_id: str | None, detail: str, at_us: int) -> int:
        changes = self._col(CHANGES)

        async def insert() -> int | None:
            newest = await changes.find_one({}, {"_id": 1}, sort=[("_id", DESCENDING)])
            seq = (int(newest["_id"]) if newest is not None else 0) + 1
            try:
                await changes.insert_one(codec.change_doc(seq, kind, agent_id, detail, at_us))
            except DuplicateKeyError:
                return None
            return seq

        seq = await self._numbered(f"logging a {kind} change", insert)
        self._bell.ring()
        return seq

    # -- revisions -------------------------------------------------------------------------
    async def add_revision(
        self,
        agent_id: str,
        character: dict[str, Any],
        *,
        source: RevisionSource,
        actor: str | None = None,
        note: str | None = None,
        expected_head: int | None = None,
    ) -> Revision:
        revisions = self._col(REVISIONS)
        draft = Revision(
            agent_id=agent_id,
            number=0,
            character=character,
            digest=character_digest(character),
            source=RevisionSource(source),
            actor=actor,
            note=note,
            created_at=from_us(self._now_us()),
        )
        doc = codec.revision_doc(draft)

        async def insert() -> int | None:
            head = await self._head_number(agent_id)
            if expected_head is not None and head != expected_head:
                raise RevisionConflict(agent_id, expected_head, head)
            try:
                await revisions.insert_one({**doc, "number": head + 1})
            except DuplicateKeyError:
                return None
            return head + 1

        number = await self._numbered(f"adding a revision of agent {agent_id!r}", insert)
        detail = codec.dumps({"revision": number, "source": str(draft.source)})
        await self._log(ChangeKind.CHARACTER, agent_id, detail, doc["created_us"])
        return codec.revision_of({**doc, "number": number})

    async def _head_number(self, agent_id: str) -> int:
        head = await self._col(REVISIONS).find_one(
            {"agent_id": agent_id}, {"number": 1}, sort=[("number", DESCENDING)]
        )
        return int(head["number"]) if head is not None else 0

    async def head(self, agent_id: str) -> Revision | None:
        with self._errors(f"reading the head revision of agent {agent_id!r}"):
            doc = await self._col(REVISIONS).find_one(
                {"agent_id": agent_id}, sort=[("number", DESCENDING)]
            )
        return codec.revision_of(doc) if doc is not None else None

    async def revision(self, agent_id: str, number: int) -> Revision | None:
        with self._errors(f"reading revision {number} of agent {agent_id!r}"):
            doc = await self._col(REVISIONS).find_one({"agent_id": agent_id, "number": number})
        return codec.revision_of(doc) if doc is not None else None

    async def revisions(
        self, agent_id: str, *, limit: int = 50, before: int | None = None
    ) -> list[Revision]:
        if limit <= 0:
            return []  # MongoDB reads limit 0 as "no limit"
        query: Document = {"agent_id": agent_id}
        if before is not None:
            query["number"] = {"$lt": before}
        with self._errors(f"listing the revisions of agent {agent_id!r}"):
            cursor = self._col(REVISIONS).find(query, sort=[("number", DESCENDING)], limit=limit)
            docs = await cursor.to_list()
        return [codec.revision_of(doc) for doc in docs]

    # -- desired state ---------------------------------------------------------------------
    async def set_desired(
        self,
        agent_id: str,
        state: DesiredState,
        *,
        placement: str | None = UNCHANGED,
        actor: str | None = None,
    ) -> Desired:
        now_us = self._now_us()
        fields: Document = {"state": str(DesiredState(state)), "actor": actor, "updated_us": now_us}
        update: Document = {"$set": fields}
        if placement is UNCHANGED:
            update["$setOnInsert"] = {"placement": None}
        else:
            fields["placement"] = placement
        desired = self._col(DESIRED)

        async def upsert() -> Document | None:
            try:
                return await desired.find_one_and_update(
                    {"_id": agent_id}, update, upsert=True, return_document=ReturnDocument.AFTER
                )
            except DuplicateKeyError:  # two first writes at once: the loser updates next time
                return None

        doc = await self._numbered(f"setting the desired state of agent {agent_id!r}", upsert)
        stored = codec.desired_of(doc)
        detail = codec.dumps({"state": str(stored.state), "placement": stored.placement})
        await self._log(ChangeKind.DESIRED, agent_id, detail, now_us)
        return stored

    async def desired(self, agent_id: str) -> Desired | None:
        with self._errors(f"reading the desired state of agent {agent_id!r}"):
            doc = await self._col(DESIRED).find_one({"_id": agent_id})
        return codec.desired_of(doc) if doc is not None else None

    async def all_desired(self) -> list[Desired]:
        with self._errors("listing desired states"):
            docs = await self._col(DESIRED).find({}, sort=[("_id", 1)]).to_list()
        return [codec.desired_of(doc) for doc in docs]

    # -- imports ---------------------------------------------------------------------------
    async def mark_import(self, mark: ImportMark) -> None:
        imports, doc = self._col(IMPORTS), codec.import_doc(mark)
        with self._errors(f"marking the import of agent {mark.agent_id!r}"):
            try:
                await imports.replace_one({"_id": mark.agent_id}, doc, upsert=True)
            except DuplicateKeyError:  # two first marks at once: the other was inserted first
                await imports.replace_one({"_id": mark.agent_id}, doc)

    async def import_mark(self, agent_id: str) -> ImportMark | None:
        with self._errors(f"reading the import mark of agent {agent_id!r}"):
            doc = await self._col(IMPORTS).find_one({"_id": agent_id})
        return codec.import_of(doc) if doc is not None else None

    # -- agents ----------------------------------------------------------------------------
    async def delete_agent(self, agent_id: str) -> None:
        with self._errors(f"deleting agent {agent_id!r}"):
            await self._col(REVISIONS).delete_many({"agent_id": agent_id})
            await self._col(DESIRED).delete_one({"_id": agent_id})
            await self._col(IMPORTS).delete_one({"_id": agent_id})
        await self._log(ChangeKind.DELETED, agent_id, "{}", self._now_us())

    # -- the change log --------------------------------------------------------------------
    async def append_change(
        self, kind: ChangeKind, agent_id: str | None = None, detail: dict[str, Any] | None = None
    ) -> Change:
        kind = ChangeKind(kind)
        text, at_us = codec.dumps(detail or {}), self._now_us()
        seq = await self._log(kind, agent_id, text, at_us)
        return codec.change_of(codec.change_doc(seq, kind, agent_id, text, at_us))

    async def latest_seq(self) -> int:
        with self._errors("reading the change log"):
            newest = await self._col(CHANGES).find_one({}, {"_id": 1}, sort=[("_id", DESCENDING)])
        return int(newest["_id"]) if newest is not None else 0

    async def changes(self, after: int, *, limit: int = 500) -> list[Change]:
        if limit <= 0:
            return []
        with self._errors("reading the change log"):
            cursor = self._col(CHANGES).find(
                {"_id": {"$gt": after}}, sort=[("_id", 1)], limit=limit
            )
            docs = await cursor.to_list()
        return [codec.change_of(doc) for doc in docs]

    async def wait_changes(self, after: int, *, wait_s: float) -> list[Change]:
        """Woken by the change stream (or a write through this store object) at once; reads
        the log every :attr:`stream_backstop_s` while the stream is up, every :attr:`poll_s`
        when there is none."""
        return await wait_changes(
            self.changes,
            self._bell,
            after,
            wait_s=wait_s,
            interval=lambda: self.stream_backstop_s if self.follows_change_stream else self.poll_s,
        )

    async def prune_changes(self, older_than: datetime) -> int:
        newest = await self.latest_seq()  # kept, so that seq never goes back
        with self._errors("pruning the change log"):
            deleted = await self._col(CHANGES).delete_many(
                {"at_us": {"$lt": to_us(older_than)}, "_id": {"$lt": newest}}
            )
        return int(deleted.deleted_count)

    # -- leases ----------------------------------------------------------------------------
    async def acquire(
        self, name: str, owner: str, *, ttl_s: float, detail: dict[str, Any] | None = None
    ) -> Lease | None:
        now_us = self._now_us()
        expires_us = now_us + round(ttl_s * 1_000_000)
        update = codec.acquire_update(owner, now_us, expires_us, detail)
        with self._errors(f"acquiring lease {name!r}"):
            try:
                doc = await self._col(LEASES).find_one_and_update(
                    codec.acquirable(name, owner, now_us),
                    update,
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            except DuplicateKeyError:
                return None  # held by another owner, unexpired: the filter matched nothing
        return codec.lease_of(doc) if doc is not None else None

    async def renew(self, name: str, owner: str, *, ttl_s: float) -> bool:
        """A lease past its expiry that nobody took meanwhile is still ``owner``'s: nobody
        else held it in between."""
        now_us = self._now_us()
        with self._errors(f"renewing lease {name!r}"):
            written = await self._col(LEASES).update_one(
                {"_id": name, "owner": owner},
                {"$set": {"expires_us": now_us + round(ttl_s * 1_000_000), "renewed_us": now_us}},
            )
        return written.matched_count > 0

    async def release(self, name: str, owner: str) -> bool:
        with self._errors(f"releasing lease {name!r}"):
            deleted = await self._col(LEASES).delete_one({"_id": name, "owner": owner})
        return deleted.deleted_count > 0

    async def lease(self, name: str) -> Lease | None:
        with self._errors(f"reading lease {name!r}"):
            doc = await self._col(LEASES).find_one({"_id": name})
        return codec.lease_of(doc) if doc is not None else None

    async def leases(self, prefix: str = "") -> list[Lease]:
        query = {"_id": {"$regex": f"^{re.escape(prefix)}"}} if prefix else {}
        with self._errors("listing leases"):
            docs = await self._col(LEASES).find(query, sort=[("_id", 1)]).to_list()
        return [codec.lease_of(doc) for doc in docs]
