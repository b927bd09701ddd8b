"""The SQLite store's schema: its migrations, applied in order when a file opens.

The schema version is the number of steps applied, recorded in ``schema_version`` (one row per
step). Steps are append only: a released step never changes, since files in the field have run it.
Opening a file applies the steps it lacks in one ``BEGIN IMMEDIATE`` transaction, so two processes
opening one new file never both apply a step, and a step that fails leaves the file as it was;
one log line says what was done (created at version N, or migrated from A to B).
"""

from __future__ import annotations

import logging
from pathlib import Path

import aiosqlite

from carrier.errors import StoreError
from carrier.install import upgrade_hint
from carrier.types import utcnow

__all__ = ["MEMORY_COLUMNS_V1", "MIGRATIONS", "SCHEMA_VERSION", "migrate"]

logger = logging.getLogger("carrier.memory.sqlite")

MEMORY_COLUMNS_V1 = (
    "id, agent_id, room_id, entity_id, kind, status, content, embedding, embedding_model, "
    "error, created_at, updated_at"
)
"""The memory columns of schema version 1 (the table keeps them, and steps copy them by name)."""

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the initial schema. Timestamps are integer microseconds since the epoch, UTC, so that
    # ordering and ``before`` comparisons are exact.
    (
        """CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            character TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )""",
        """CREATE TABLE rooms (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            platform TEXT NOT NULL,
            platform_id TEXT NOT NULL,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX rooms_agent ON rooms (agent_id)",
        """CREATE TABLE entities (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            platform TEXT NOT NULL,
            platform_id TEXT NOT NULL,
            data TEXT NOT NULL
        )""",
        "CREATE INDEX entities_agent ON entities (agent_id)",
        """CREATE TABLE participants (
            room_id TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            PRIMARY KEY (room_id, entity_id)
        )""",
        "CREATE INDEX participants_entity ON participants (entity_id)",
        """CREATE TABLE room_states (
            agent_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            state TEXT NOT NULL,
            PRIMARY KEY (agent_id, room_id)
        )""",
        """CREATE TABLE memories (
            id TEXT PRIMARY KEY,
            agent_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            content TEXT NOT NULL,
            embedding BLOB,
            embedding_model TEXT,
            error TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )""",
        "CREATE INDEX memories_room ON memories (agent_id, room_id, created_at)",
        "CREATE INDEX memories_entity ON memories (agent_id, entity_id, created_at)",
        "CREATE INDEX memories_kind ON memories (agent_id, kind, created_at)",
        "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ),
    # 2: fast recall. Memories get a stable integer key (``seq``: an INTEGER PRIMARY KEY keeps its
    # value through VACUUM, unlike a plain rowid), which keys a full-text index (FTS5, contentless:
    # the text is not stored twice) and a change log that the in-memory vector index of every
    # process reads to stay in step with writes, its own and other processes'. Triggers keep both
    # in step, so no write path can forget them.
    (
        """CREATE TABLE memories_v2 (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            agent_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            content TEXT NOT NULL,
            embedding BLOB,
            embedding_model TEXT,
            error TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )""",
        f"""INSERT INTO memories_v2 (seq, {MEMORY_COLUMNS_V1})
            SELECT rowid, {MEMORY_COLUMNS_V1} FROM memories ORDER BY rowid""",
        "DROP TABLE memories",
        "ALTER TABLE memories_v2 RENAME TO memories",
        "CREATE INDEX memories_room ON memories (agent_id, room_id, created_at)",
        "CREATE INDEX memories_entity ON memories (agent_id, entity_id, created_at)",
        "CREATE INDEX memories_kind ON memories (agent_id, kind, created_at)",
        "CREATE INDEX memories_vectors ON memories (agent_id, embedding_model)",
        """CREATE VIRTUAL TABLE memories_fts USING fts5(
            text, content='', tokenize='unicode61 remove_diacritics 2'
        )""",
        """INSERT INTO memories_fts (rowid, text)
            SELECT seq, coalesce(json_extract(content, '$.text'), '') FROM memories""",
        """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, text)
            VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
        END""",
        # A contentless FTS5 table forgets a row when told the exact text it indexed.
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text)
            VALUES ('delete', old.seq, coalesce(json_extract(old.content, '$.text'), ''));
        END""",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text)
            VALUES ('delete', old.seq, coalesce(json_extract(old.content, '$.text'), ''));
            INSERT INTO memories_fts (rowid, text)
            VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
        END""",
        """CREATE TABLE memory_changes (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            agent_id TEXT NOT NULL,
            memory_id TEXT NOT NULL
        )""",
        """CREATE TRIGGER memories_log_insert AFTER INSERT ON memories
        WHEN new.embedding IS NOT NULL BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (new.agent_id, new.id);
        END""",
        """CREATE TRIGGER memories_log_update AFTER UPDATE OF embedding, embedding_model ON memories
        WHEN old.embedding IS NOT NULL OR new.embedding IS NOT NULL BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (new.agent_id, new.id);
        END""",
        """CREATE TRIGGER memories_log_delete AFTER DELETE ON memories
        WHEN old.embedding IS NOT NULL BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (old.agent_id, old.id);
        END""",
    ),
    # 3: what a turn reads, a room's (or a person's) latest memories of one kind, straight from an
    # index in order. Without these the planner may walk every message of the agent through the
    # kind index and filter by room: ~95 ms a read at 100k memories instead of ~0.1 ms.
    (
        "CREATE INDEX memories_room_kind ON memories (agent_id, room_id, kind, created_at)",
        "CREATE INDEX memories_entity_kind ON memories (agent_id, entity_id, kind, created_at)",
    ),
    # 4: the full-text index's vocabulary (how many memories hold each word), so a text search
    # looks for a query's rare words and skips the common ones.
    ("CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, row)",),
    # 5: an update that leaves a memory's text or vector as it was (a message updated with the
    # vector made for it) touches neither the full-text index (a delete and a re-insert of the
    # same text every turn, which also grow the index) nor the change log (a needless ANN
    # re-insert in every process).
    (
        "DROP TRIGGER memories_fts_update",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories
        WHEN json_extract(old.content, '$.text') IS NOT json_extract(new.content, '$.text') BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text)
            VALUES ('delete', old.seq, coalesce(json_extract(old.content, '$.text'), ''));
            INSERT INTO memories_fts (rowid, text)
            VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
        END""",
        "DROP TRIGGER memories_log_update",
        """CREATE TRIGGER memories_log_update AFTER UPDATE OF embedding, embedding_model ON memories
        WHEN old.embedding IS NOT new.embedding OR old.embedding_model IS NOT new.embedding_model
        BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (new.agent_id, new.id);
        END""",
    ),
    # 6: knowledge gets a full-text index of its own (as it has a vector set of its own), so a
    # turn's knowledge search reads knowledge's postings alone: through the index of every
    # memory it read and ranked every message holding the query's words, then dropped them by
    # kind (~10 ms a turn at 10k messages). A memory's kind never changes, so the triggers test
    # it once. The main index still holds knowledge too, for searches of several kinds.
    (
        """CREATE VIRTUAL TABLE knowledge_fts USING fts5(
            text, content='', tokenize='unicode61 remove_diacritics 2'
        )""",
        """INSERT INTO knowledge_fts (rowid, text)
            SELECT seq, coalesce(json_extract(content, '$.text'), '') FROM memories
            WHERE kind = 'knowledge'""",
        """CREATE TRIGGER knowledge_fts_insert AFTER INSERT ON memories
        WHEN new.kind = 'knowledge' BEGIN
            INSERT INTO knowledge_fts (rowid, text)
            VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
        END""",
        """CREATE TRIGGER knowledge_fts_delete AFTER DELETE ON memories
        WHEN old.kind = 'knowledge' BEGIN
            INSERT INTO knowledge_fts (knowledge_fts, rowid, text)
            VALUES ('delete', old.seq, coalesce(json_extract(old.content, '$.text'), ''));
        END""",
        """CREATE TRIGGER knowledge_fts_update AFTER UPDATE OF content ON memories
        WHEN new.kind = 'knowledge'
            AND json_extract(old.content, '$.text') IS NOT json_extract(new.content, '$.text')
        BEGIN
            INSERT INTO knowledge_fts (knowledge_fts, rowid, text)
            VALUES ('delete', old.seq, coalesce(json_extract(old.content, '$.text'), ''));
            INSERT INTO knowledge_fts (rowid, text)
            VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
        END""",
        "CREATE VIRTUAL TABLE knowledge_vocab USING fts5vocab(knowledge_fts, row)",
    ),
    # 7: the change log also gets every memory added or deleted without a vector, but for
    # messages (a fragment stored unembedded, a fact), and every change to a knowledge
    # fragment's text (under the same vector), so that a process can keep what it read of
    # those kinds (knowledge's vocabulary, a person's facts none so far) and know exactly when
    # to read it again (ChangeWatch._kinds_version). Changes of vectors were logged already;
    # messages, added every turn, are not read that way.
    (
        """CREATE TRIGGER memories_log_insert_unembedded AFTER INSERT ON memories
        WHEN new.kind != 'message' AND new.embedding IS NULL BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (new.agent_id, new.id);
        END""",
        """CREATE TRIGGER memories_log_delete_unembedded AFTER DELETE ON memories
        WHEN old.kind != 'message' AND old.embedding IS NULL BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (old.agent_id, old.id);
        END""",
        """CREATE TRIGGER knowledge_log_update AFTER UPDATE OF content ON memories
        WHEN new.kind = 'knowledge'
            AND json_extract(old.content, '$.text') IS NOT json_extract(new.content, '$.text')
        BEGIN
            INSERT INTO memory_changes (agent_id, memory_id) VALUES (new.agent_id, new.id);
        END""",
    ),
    # 8: a memory added reaches the full-text index of every memory later, in batches
    # (SQLiteSearch.catch_up): an insert only notes its row in ``memories_fts_pending``. Indexed
    # in the write itself, each of a turn's two inserts wrote FTS5's postings and a new segment
    # at its commit (~0.1 ms each, and segments to merge); a batch writes one segment for all.
    # A search of that index catches up first, so it misses nothing. A memory deleted or
    # rewritten before its batch only leaves (or keeps) its pending note: the index never gets a
    # 'delete' for a row it does not hold (a contentless FTS5 table must be told exactly what it
    # holds). Knowledge's own index is still written with the row.
    (
        "CREATE TABLE memories_fts_pending (seq INTEGER PRIMARY KEY)",
        "DROP TRIGGER memories_fts_insert",
        """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT OR IGNORE INTO memories_fts_pending (seq) VALUES (new.seq);
        END""",
        "DROP TRIGGER memories_fts_delete",
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text)
            SELECT 'delete', old.seq, coalesce(json_extract(old.content, '$.text'), '')
            WHERE NOT EXISTS (SELECT 1 FROM memories_fts_pending WHERE seq = old.seq);
            DELETE FROM memories_fts_pending WHERE seq = old.seq;
        END""",
        "DROP TRIGGER memories_fts_update",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories
        WHEN json_extract(old.content, '$.text') IS NOT json_extract(new.content, '$.text')
            AND NOT EXISTS (SELECT 1 FROM memories_fts_pending WHERE seq = old.seq)
        BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text)
            VALUES ('delete', old.seq, coalesce(json_extract(old.content, '$.text'), ''));
            INSERT INTO memories_fts (rowid, text)
            VALUES (new.seq, coalesce(json_extract(new.content, '$.text'), ''));
        END""",
    ),
)
"""Schema steps: step ``i`` (0-based) brings the database to version ``i + 1``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


async def migrate(db: aiosqlite.Connection, path: str | Path) -> None:
    """Bring the database of ``db`` (the file at ``path``) to :data:`SCHEMA_VERSION`; raises
    :class:`StoreError` for a file newer than this Carrier."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    # IMMEDIATE takes the write lock first, so two processes opening one new file do not both
    # apply the same steps.
    await db.execute("BEGIN IMMEDIATE")
    try:
        async with db.execute("SELECT MAX(version) FROM schema_version") as cursor:
            row = await cursor.fetchone()
        current = int(row[0] or 0) if row is not None else 0
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the SQLite store {path} has schema version {current}, newer than "
                f"this Carrier supports ({SCHEMA_VERSION}); {upgrade_hint()} "
                "or point CARRIER_DATA_DIR elsewhere"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                await db.execute(statement)
            await db.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                (version, utcnow().isoformat()),
            )
        await db.execute("COMMIT")
        if current == 0:
            logger.info("SQLite store %s created at schema version %d", path, SCHEMA_VERSION)
        elif current < SCHEMA_VERSION:
            logger.info(
                "SQLite store %s migrated from schema version %d to %d",
                path,
                current,
                SCHEMA_VERSION,
            )
    except BaseException:
        if db.in_transaction:
            await db.execute("ROLLBACK")
        raise
