"""The SQLite fleet store's SQL: the schema and the statements, each a plain function run whole on
the store's thread (see :mod:`carrier._sqlite_thread`).

Times are integer microseconds since the epoch (UTC), so comparisons are exact and every time
comes back timezone-aware. Characters and details are JSON text. Every write that must not
interleave with another process's runs in a ``BEGIN IMMEDIATE`` transaction (the file's write
lock first): numbering a revision, taking a lease, and each write together with its change.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from carrier._sqlite_thread import immediate
from carrier.fleet.base import RevisionConflict
from carrier.fleet.model import (
    Change,
    ChangeKind,
    Desired,
    DesiredState,
    ImportMark,
    Lease,
    Revision,
    RevisionSource,
)
from carrier.types import from_us

__all__ = [
    "FLEET_MIGRATIONS",
    "FLEET_SCHEMA_VERSION",
    "acquire",
    "add_revision",
    "append_change",
    "change_of",
    "delete_agent",
    "desired_of",
    "dumps",
    "import_of",
    "lease_of",
    "mark_import",
    "prune_changes",
    "release",
    "renew",
    "revision_of",
    "select",
    "set_desired",
]

FLEET_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE fleet_revisions (
            agent_id TEXT NOT NULL,
            number INTEGER NOT NULL,
            digest TEXT NOT NULL,
            source TEXT NOT NULL,
            actor TEXT,
            note TEXT,
            created_at INTEGER NOT NULL,
            character TEXT NOT NULL,
            PRIMARY KEY (agent_id, number)
        ) WITHOUT ROWID""",
        """CREATE TABLE fleet_desired (
            agent_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            placement TEXT,
            actor TEXT,
            updated_at INTEGER NOT NULL
        )""",
        """CREATE TABLE fleet_imports (
            agent_id TEXT PRIMARY KEY,
            path TEXT NOT NULL,
            file_digest TEXT NOT NULL,
            revision INTEGER NOT NULL,
            at INTEGER NOT NULL
        )""",
        # AUTOINCREMENT: a seq is never handed out twice, even after the newest entries went.
        """CREATE TABLE fleet_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            agent_id TEXT,
            detail TEXT NOT NULL,
            at INTEGER NOT NULL
        )""",
        "CREATE INDEX fleet_changes_at ON fleet_changes (at)",
        """CREATE TABLE fleet_leases (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires_at INTEGER NOT NULL,
            acquired_at INTEGER NOT NULL,
            renewed_at INTEGER NOT NULL,
            detail TEXT NOT NULL
        )""",
    ),
)
"""Schema steps: step ``i`` (0-based) brings the fleet tables to version ``i + 1``. Append only."""

FLEET_SCHEMA_VERSION = len(FLEET_MIGRATIONS)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- rows to records ---------------------------------------------------------------------------
def revision_of(row: sqlite3.Row) -> Revision:
    return Revision(
        agent_id=row["agent_id"],
        number=row["number"],
        character=json.loads(row["character"]),
        digest=row["digest"],
        source=RevisionSource(row["source"]),
        actor=row["actor"],
        note=row["note"],
        created_at=from_us(row["created_at"]),
    )


def desired_of(row: sqlite3.Row) -> Desired:
    return Desired(
        agent_id=row["agent_id"],
        state=DesiredState(row["state"]),
        placement=row["placement"],
        actor=row["actor"],
        updated_at=from_us(row["updated_at"]),
    )


def import_of(row: sqlite3.Row) -> ImportMark:
    return ImportMark(
        agent_id=row["agent_id"],
        path=row["path"],
        file_digest=row["file_digest"],
        revision=row["revision"],
        at=from_us(row["at"]),
    )


def change_of(row: sqlite3.Row) -> Change:
    return Change(
        seq=row["seq"],
        kind=ChangeKind(row["kind"]),
        agent_id=row["agent_id"],
        detail=json.loads(row["detail"]),
        at=from_us(row["at"]),
    )


def lease_of(row: sqlite3.Row) -> Lease:
    return Lease(
        name=row["name"],
        owner=row["owner"],
        expires_at=from_us(row["expires_at"]),
        acquired_at=from_us(row["acquired_at"]),
        renewed_at=from_us(row["renewed_at"]),
        detail=json.loads(row["detail"]),
    )


# -- statements ----------------------------------------------------------------------------------
def select(db: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    return db.execute(sql, params).fetchall()


def _append(
    db: sqlite3.Connection, kind: ChangeKind, agent_id: str | None, detail: str, at_us: int
) -> sqlite3.Row:
    rows = db.execute(
        "INSERT INTO fleet_changes (kind, agent_id, detail, at) VALUES (?, ?, ?, ?) "
        "RETURNING seq, kind, agent_id, detail, at",
        (str(kind), agent_id, detail, at_us),
    ).fetchall()  # all of it: a statement left unfinished would keep the write lock
    return rows[0]


def append_change(
    db: sqlite3.Connection, kind: ChangeKind, agent_id: str | None, detail: str, at_us: int
) -> sqlite3.Row:
    with immediate(db):
        return _append(db, kind, agent_id, detail, at_us)


def add_revision(
    db: sqlite3.Connection,
    agent_id: str,
    row: dict[str, Any],
    expected_head: int | None,
) -> int:
    """Number the revision head + 1 and store it with its ``character`` change; returns the
    number. ``row`` holds the columns but ``number``."""
    with immediate(db):
        (head,) = db.execute(
            "SELECT COALESCE(MAX(number), 0) FROM fleet_revisions WHERE agent_id = ?",
            (agent_id,),
        ).fetchone()
        if expected_head is not None and head != expected_head:
            raise RevisionConflict(agent_id, expected_head, head)
        number = int(head) + 1
        db.execute(
            "INSERT INTO fleet_revisions (agent_id, number, digest, source, actor, note, "
            "created_at, character) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                agent_id,
                number,
                row["digest"],
                row["source"],
                row["actor"],
                row["note"],
                row["created_at"],
                row["character"],
            ),
        )
        detail = dumps({"revision": number, "source": row["source"]})
        _append(db, ChangeKind.CHARACTER, agent_id, detail, row["created_at"])
    return number


def set_desired(
    db: sqlite3.Connection,
    agent_id: str,
    state: DesiredState,
    placement: str | None,
    keep_placement: bool,
    actor: str | None,
    at_us: int,
) -> sqlite3.Row:
    with immediate(db):
        if keep_placement:
            old = db.execute(
                "SELECT placement FROM fleet_desired WHERE agent_id = ?", (agent_id,)
            ).fetchone()
            placement = old["placement"] if old is not None else None
        rows = db.execute(
            "INSERT OR REPLACE INTO fleet_desired (agent_id, state, placement, actor, updated_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING *",
            (agent_id, str(state), placement, actor, at_us),
        ).fetchall()
        detail = dumps({"state": str(state), "placement": placement})
        _append(db, ChangeKind.DESIRED, agent_id, detail, at_us)
    return rows[0]


def mark_import(db: sqlite3.Connection, mark: ImportMark, at_us: int) -> None:
    db.execute(
        "INSERT OR REPLACE INTO fleet_imports (agent_id, path, file_digest, revision, at) "
        "VALUES (?, ?, ?, ?, ?)",
        (mark.agent_id, mark.path, mark.file_digest, mark.revision, at_us),
    )


def delete_agent(db: sqlite3.Connection, agent_id: str, at_us: int) -> None:
    with immediate(db):
        for table in ("fleet_revisions", "fleet_desired", "fleet_imports"):
            db.execute(f"DELETE FROM {table} WHERE agent_id = ?", (agent_id,))
        _append(db, ChangeKind.DELETED, agent_id, "{}", at_us)


def prune_changes(db: sqlite3.Connection, before_us: int) -> int:
    with immediate(db):
        return db.execute(
            "DELETE FROM fleet_changes WHERE at < ? AND seq < (SELECT MAX(seq) FROM fleet_changes)",
            (before_us,),
        ).rowcount


def acquire(
    db: sqlite3.Connection,
    name: str,
    owner: str,
    now_us: int,
    expires_us: int,
    detail: str | None,
) -> sqlite3.Row | None:
    """Take or renew the lease inside one write transaction: no other process can take it
    between the look and the write."""
    with immediate(db):
        old = db.execute("SELECT * FROM fleet_leases WHERE name = ?", (name,)).fetchone()
        mine = old is not None and old["owner"] == owner
        if old is not None and not mine and old["expires_at"] > now_us:
            return None  # another owner's, unexpired
        held = old is not None and mine and old["expires_at"] > now_us
        acquired_us = old["acquired_at"] if old is not None and held else now_us
        if detail is None:
            detail = old["detail"] if old is not None and mine else "{}"
        rows = db.execute(
            "INSERT OR REPLACE INTO fleet_leases "
            "(name, owner, expires_at, acquired_at, renewed_at, detail) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
            (name, owner, expires_us, acquired_us, now_us, detail),
        ).fetchall()
    return rows[0]


def renew(db: sqlite3.Connection, name: str, owner: str, now_us: int, expires_us: int) -> bool:
    """One conditional UPDATE (atomic on its own). A lease past its expiry that nobody took
    meanwhile is still ``owner``'s: nobody else held it in between."""
    return (
        db.execute(
            "UPDATE fleet_leases SET expires_at = ?, renewed_at = ? WHERE name = ? AND owner = ?",
            (expires_us, now_us, name, owner),
        ).rowcount
        > 0
    )


def release(db: sqlite3.Connection, name: str, owner: str) -> bool:
    return (
        db.execute("DELETE FROM fleet_leases WHERE name = ? AND owner = ?", (name, owner)).rowcount
        > 0
    )
