"""SQLiteAuditLog: the audit log as a table of the SQLite file the store uses.

It shares ``<data_dir>/carrier.db`` with the main store and the job store, with its own
connection, its own table (``audit_events``) and its own schema version table
(``audit_schema_version``). The table itself keeps the log append-only: a trigger aborts every
``UPDATE``, and another aborts a ``DELETE`` of an entry younger than a day, so a bug (or a
statement typed into ``sqlite3``) cannot rewrite history or wipe the recent past. Each call runs
whole on the log's own thread.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from carrier.audit.base import AuditLog
from carrier.audit.model import AuditEvent, AuditFilter, micros
from carrier.errors import StoreError
from carrier.install import upgrade_hint
from carrier.types import utcnow

__all__ = ["AUDIT_MIGRATIONS", "AUDIT_SCHEMA_VERSION", "SQLiteAuditLog"]

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_S = 10.0

AUDIT_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE audit_events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            at_us INTEGER NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT,
            agent_id TEXT,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX audit_events_at ON audit_events (at_us DESC, id DESC)",
        "CREATE INDEX audit_events_agent ON audit_events (agent_id, at_us DESC)",
        "CREATE INDEX audit_events_kind ON audit_events (kind, at_us DESC)",
        "CREATE INDEX audit_events_actor ON audit_events (actor, at_us DESC)",
        """CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: entries are never changed'); END""",
        """CREATE TRIGGER audit_events_keep_recent BEFORE DELETE ON audit_events
        WHEN OLD.at_us > (CAST(strftime('%s', 'now') AS INTEGER) - 86400) * 1000000
        BEGIN SELECT RAISE(ABORT, 'audit entries younger than a day are never deleted'); END""",
    ),
)
"""Step ``i`` (0-based) brings a file to version ``i + 1``. Append only."""

AUDIT_SCHEMA_VERSION = len(AUDIT_MIGRATIONS)


class SQLiteAuditLog(AuditLog):
    """The audit log in a SQLite file (usually ``<data_dir>/carrier.db``)."""

    def __init__(self, *, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path).expanduser()
        self._db: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"SQLiteAuditLog(path={str(self.path)!r})"

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        async with self._lock:
            if self._executor is not None:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the directory of the audit log {self.path}: {exc}; "
                    "set CARRIER_DATA_DIR to a writable directory"
                ) from exc
            executor = ThreadPoolExecutor(1, thread_name_prefix="carrier-audit-sqlite")
            try:
                await asyncio.get_running_loop().run_in_executor(executor, self._connect)
            except BaseException:
                executor.shutdown(wait=False)
                raise
            self._executor = executor

    async def close(self) -> None:
        async with self._lock:
            executor, self._executor = self._executor, None
            if executor is None:
                return
            await asyncio.get_running_loop().run_in_executor(executor, self._disconnect)
            executor.shutdown(wait=False)

    async def schema_version(self) -> int:
        rows = await self._run(
            "reading the schema version",
            lambda db: db.execute("SELECT MAX(version) FROM audit_schema_version").fetchall(),
        )
        return int(rows[0][0] or 0)

    # -- primitives ------------------------------------------------------------------------
    async def _insert(self, event: AuditEvent) -> None:
        row = (
            event.id,
            micros(event.at),
            event.kind,
            event.actor,
            event.agent_id,
            event.model_dump_json(),
        )
        await self._run(
            f"recording a {event.kind} event",
            lambda db: db.execute(
                "INSERT INTO audit_events (id, at_us, kind, actor, agent_id, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            ),
        )

    async def _select(
        self, where: AuditFilter, *, after: tuple[int, str] | None, limit: int
    ) -> list[AuditEvent]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("agent_id", where.agent_id), ("actor", where.actor)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.kinds:
            clauses.append(f"kind IN ({', '.join('?' * len(where.kinds))})")
            params += list(where.kinds)
        if where.since is not None:
            clauses.append("at_us >= ?")
            params.append(micros(where.since))
        if where.until is not None:
            clauses.append("at_us < ?")
            params.append(micros(where.until))
        if after is not None:
            clauses.append("(at_us < ? OR (at_us = ? AND id < ?))")
            params += [after[0], after[0], after[1]]
        sql = (
            "SELECT data FROM audit_events"
            + (f" WHERE {' AND '.join(clauses)}" if clauses else "")
            + " ORDER BY at_us DESC, id DESC LIMIT ?"
        )
        rows = await self._run(
            "reading events", lambda db: db.execute(sql, [*params, limit]).fetchall()
        )
        return [AuditEvent.model_validate_json(row[0]) for row in rows]

    async def _delete_before(self, at_us: int) -> int:
        def delete(db: sqlite3.Connection) -> int:
            return db.execute("DELETE FROM audit_events WHERE at_us < ?", (at_us,)).rowcount

        return await self._run("deleting expired events", delete)

    # -- plumbing --------------------------------------------------------------------------
    async def _run(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        executor = self._executor
        if executor is None:
            raise StoreError(
                f"audit log {self.path} is not open; use `async with SQLiteAuditLog(...)` "
                "or await audit.open() first"
            )

        def call() -> T:
            assert self._db is not None
            try:
                return fn(self._db)
            except sqlite3.Error as exc:
                raise StoreError(f"audit log {self.path}: {what} failed: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(executor, call)

    def _connect(self) -> None:
        try:
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"audit log {self.path}: opening failed: {exc}") from exc
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._migrate(db)
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"audit log {self.path}: migrating failed: {exc}") from exc
        except BaseException:
            db.close()
            raise
        self._db = db

    def _disconnect(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute(
            "CREATE TABLE IF NOT EXISTS audit_schema_version "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        db.execute("BEGIN IMMEDIATE")  # two processes opening one new file: one migrates
        try:
            row = db.execute("SELECT MAX(version) FROM audit_schema_version").fetchone()
            current = int(row[0] or 0)
            if current > AUDIT_SCHEMA_VERSION:
                raise StoreError(
                    f"the audit log in {self.path} has schema version {current}, newer than this "
                    f"Carrier supports ({AUDIT_SCHEMA_VERSION}); {upgrade_hint()} "
                    "or point CARRIER_DATA_DIR elsewhere"
                )
            for version in range(current + 1, AUDIT_SCHEMA_VERSION + 1):
                for statement in AUDIT_MIGRATIONS[version - 1]:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO audit_schema_version (version, applied_at) VALUES (?, ?)",
                    (version, utcnow().isoformat()),
                )
                log.info("audit log in %s migrated to version %d", self.path, version)
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
