"""SQLiteAuditLog: the audit log as a table of the SQLite file the store uses.

It shares ``<data_dir>/carrier.db`` with the main store and the job store, with its own
connection, its own table (``audit_events``) and its own schema version table
(``audit_schema_version``). The table itself keeps the log append-only: a trigger aborts every
``UPDATE``, and another aborts a ``DELETE`` of an entry younger than a day, so a bug (or a
statement typed into ``sqlite3``) cannot rewrite history or wipe the recent past. Each call runs
whole on the log's own thread.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

from carrier._sqlite_thread import SQLiteThread
from carrier.audit.base import AuditLog
from carrier.audit.model import AuditEvent, AuditFilter, micros
from carrier.types import utcnow

__all__ = ["AUDIT_MIGRATIONS", "AUDIT_SCHEMA_VERSION", "SQLiteAuditLog"]

log = logging.getLogger(__name__)

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
        self._thread = SQLiteThread(
            path=self.path,
            version_table="audit_schema_version",
            migrations=AUDIT_MIGRATIONS,
            stamp=lambda: utcnow().isoformat(),
            name="audit log",
            tables="audit tables",
            opener="SQLiteAuditLog",
            logger=log,
        )

    def __repr__(self) -> str:
        return f"SQLiteAuditLog(path={str(self.path)!r})"

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    async def schema_version(self) -> int:
        rows = await self._thread.run(
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
        await self._thread.run(
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
        rows = await self._thread.run(
            "reading events", lambda db: db.execute(sql, [*params, limit]).fetchall()
        )
        return [AuditEvent.model_validate_json(row[0]) for row in rows]

    async def _delete_before(self, at_us: int) -> int:
        def delete(db: sqlite3.Connection) -> int:
            return db.execute("DELETE FROM audit_events WHERE at_us < ?", (at_us,)).rowcount

        return await self._thread.run("deleting expired events", delete)
