"""SQLiteFleetStore: the fleet as tables of the SQLite file the store uses.

It shares ``<data_dir>/carrier.db`` with the memory store, the job store and the audit log, with
its own connection, its own tables (``fleet_*``) and its own schema version table
(``fleet_schema_version``). Each call runs whole on the store's own thread (see
:mod:`carrier._sqlite_thread`); numbering a revision and taking a lease run in ``BEGIN
IMMEDIATE`` transactions, so processes sharing the file (WAL) never get one number or one lease
twice, and a revision, a desired state or a deletion is written in the same transaction as its
change: a follower never sees one without the other.

Followers poll the change log every :attr:`~carrier.fleet.base.FleetStore.poll_s`; a change
written through this store object wakes its own waiters at once.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from carrier._sqlite_thread import SQLiteThread
from carrier.fleet import _sqlite_ops as ops
from carrier.fleet._sqlite_ops import FLEET_MIGRATIONS, FLEET_SCHEMA_VERSION
from carrier.fleet._wake import Bell, wait_changes
from carrier.fleet.base import UNCHANGED, FleetStore
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

__all__ = ["FLEET_MIGRATIONS", "FLEET_SCHEMA_VERSION", "SQLiteFleetStore"]

log = logging.getLogger(__name__)


class SQLiteFleetStore(FleetStore):
    """The FleetStore in a SQLite file (usually ``<data_dir>/carrier.db``). Usage::

    async with SQLiteFleetStore(path=settings.store_path) as fleet:
        await fleet.set_desired("harbor", DesiredState.RUNNING)
    """

    def __init__(self, *, path: str | Path, clock: Clock = system_clock) -> None:
        super().__init__(clock=clock)
        self.path = Path(path).expanduser()
        self._thread = SQLiteThread(
            path=self.path,
            version_table="fleet_schema_version",
            migrations=FLEET_MIGRATIONS,
            stamp=lambda: self.clock().isoformat(),
            name="fleet store",
            tables="fleet tables",
            opener="SQLiteFleetStore",
            logger=log,
        )
        self._bell = Bell()

    def __repr__(self) -> str:
        return f"SQLiteFleetStore(path={str(self.path)!r})"

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    async def schema_version(self) -> int:
        rows = await self._thread.run(
            "reading the schema version",
            ops.select,
            "SELECT MAX(version) FROM fleet_schema_version",
        )
        return int(rows[0][0] or 0)

    def _now_us(self) -> int:
        return to_us(self.clock())

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
        row: dict[str, Any] = {
            "digest": character_digest(character),
            "source": str(source),
            "actor": actor,
            "note": note,
            "created_at": self._now_us(),
            "character": ops.dumps(character),
        }
        number = await self._thread.run(
            f"adding a revision of agent {agent_id!r}",
            ops.add_revision,
            agent_id,
            row,
            expected_head,
        )
        self._bell.ring()
        return Revision(
            agent_id=agent_id,
            number=number,
            character=json.loads(row["character"]),  # a copy, as stored
            digest=row["digest"],
            source=RevisionSource(source),
            actor=actor,
            note=note,
            created_at=from_us(row["created_at"]),
        )

    async def head(self, agent_id: str) -> Revision | None:
        rows = await self._thread.run(
            f"reading the head revision of agent {agent_id!r}",
            ops.select,
            "SELECT * FROM fleet_revisions WHERE agent_id = ? ORDER BY number DESC LIMIT 1",
            (agent_id,),
        )
        return ops.revision_of(rows[0]) if rows else None

    async def revision(self, agent_id: str, number: int) -> Revision | None:
        rows = await self._thread.run(
            f"reading revision {number} of agent {agent_id!r}",
            ops.select,
            "SELECT * FROM fleet_revisions WHERE agent_id = ? AND number = ?",
            (agent_id, number),
        )
        return ops.revision_of(rows[0]) if rows else None

    async def revisions(
        self, agent_id: str, *, limit: int = 50, before: int | None = None
    ) -> list[Revision]:
        if limit <= 0:
            return []
        rows = await self._thread.run(
            f"listing the revisions of agent {agent_id!r}",
            ops.select,
            "SELECT * FROM fleet_revisions WHERE agent_id = ? AND number < ? "
            "ORDER BY number DESC LIMIT ?",
            (agent_id, before if before is not None else 2**62, limit),
        )
        return [ops.revision_of(row) for row in rows]

    # -- desired state ---------------------------------------------------------------------
    async def set_desired(
        self,
        agent_id: str,
        state: DesiredState,
        *,
        placement: str | None = UNCHANGED,
        actor: str | None = None,
    ) -> Desired:
        keep = placement is UNCHANGED
        row = await self._thread.run(
            f"setting the desired state of agent {agent_id!r}",
            ops.set_desired,
            agent_id,
            DesiredState(state),
            None if keep else placement,
            keep,
            actor,
            self._now_us(),
        )
        self._bell.ring()
        return ops.desired_of(row)

    async def desired(self, agent_id: str) -> Desired | None:
        rows = await self._thread.run(
            f"reading the desired state of agent {agent_id!r}",
            ops.select,
            "SELECT * FROM fleet_desired WHERE agent_id = ?",
            (agent_id,),
        )
        return ops.desired_of(rows[0]) if rows else None

    async def all_desired(self) -> list[Desired]:
        rows = await self._thread.run(
            "listing desired states",
            ops.select,
            "SELECT * FROM fleet_desired ORDER BY agent_id",
        )
        return [ops.desired_of(row) for row in rows]

    # -- imports ---------------------------------------------------------------------------
    async def mark_import(self, mark: ImportMark) -> None:
        await self._thread.run(
            f"marking the import of agent {mark.agent_id!r}",
            ops.mark_import,
            mark,
            to_us(mark.at),
        )

    async def import_mark(self, agent_id: str) -> ImportMark | None:
        rows = await self._thread.run(
            f"reading the import mark of agent {agent_id!r}",
            ops.select,
            "SELECT * FROM fleet_imports WHERE agent_id = ?",
            (agent_id,),
        )
        return ops.import_of(rows[0]) if rows else None

    # -- agents ----------------------------------------------------------------------------
    async def delete_agent(self, agent_id: str) -> None:
        await self._thread.run(
            f"deleting agent {agent_id!r}", ops.delete_agent, agent_id, self._now_us()
        )
        self._bell.ring()

    # -- the change log --------------------------------------------------------------------
    async def append_change(
        self, kind: ChangeKind, agent_id: str | None = None, detail: dict[str, Any] | None = None
    ) -> Change:
        row = await self._thread.run(
            f"logging a {kind} change",
            ops.append_change,
            ChangeKind(kind),
            agent_id,
            ops.dumps(detail or {}),
            self._now_us(),
        )
        self._bell.ring()
        return ops.change_of(row)

    async def latest_seq(self) -> int:
        rows = await self._thread.run(
            "reading the change log", ops.select, "SELECT MAX(seq) FROM fleet_changes"
        )
        return int(rows[0][0] or 0)

    async def changes(self, after: int, *, limit: int = 500) -> list[Change]:
        if limit <= 0:
            return []
        rows = await self._thread.run(
            "reading the change log",
            ops.select,
            "SELECT * FROM fleet_changes WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        )
        return [ops.change_of(row) for row in rows]

    async def wait_changes(self, after: int, *, wait_s: float) -> list[Change]:
        """Polls every :attr:`poll_s` (another process cannot wake this one); a change written
        through this store object wakes its waiters at once."""
        return await wait_changes(
            self.changes, self._bell, after, wait_s=wait_s, interval=lambda: self.poll_s
        )

    async def prune_changes(self, older_than: datetime) -> int:
        return await self._thread.run(
            "pruning the change log", ops.prune_changes, to_us(older_than)
        )

    # -- leases ----------------------------------------------------------------------------
    async def acquire(
        self, name: str, owner: str, *, ttl_s: float, detail: dict[str, Any] | None = None
    ) -> Lease | None:
        now = self.clock()
        row = await self._thread.run(
            f"acquiring lease {name!r}",
            ops.acquire,
            name,
            owner,
            to_us(now),
            to_us(now) + round(ttl_s * 1_000_000),
            ops.dumps(detail) if detail is not None else None,
        )
        return ops.lease_of(row) if row is not None else None

    async def renew(self, name: str, owner: str, *, ttl_s: float) -> bool:
        now_us = self._now_us()
        return await self._thread.run(
            f"renewing lease {name!r}",
            ops.renew,
            name,
            owner,
            now_us,
            now_us + round(ttl_s * 1_000_000),
        )

    async def release(self, name: str, owner: str) -> bool:
        return await self._thread.run(f"releasing lease {name!r}", ops.release, name, owner)

    async def lease(self, name: str) -> Lease | None:
        rows = await self._thread.run(
            f"reading lease {name!r}",
            ops.select,
            "SELECT * FROM fleet_leases WHERE name = ?",
            (name,),
        )
        return ops.lease_of(rows[0]) if rows else None

    async def leases(self, prefix: str = "") -> list[Lease]:
        rows = await self._thread.run(
            "listing leases",
            ops.select,
            "SELECT * FROM fleet_leases WHERE substr(name, 1, ?) = ? ORDER BY name",
            (len(prefix), prefix),
        )
        return [ops.lease_of(row) for row in rows]
