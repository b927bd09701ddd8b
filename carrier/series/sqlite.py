"""SQLiteSeriesStore: the counters as a table of the SQLite file the store uses.

It shares ``<data_dir>/carrier.db`` with the main store, the job store and the audit log, with
its own connection, its own table (``series_counters``, keyed by step, agent, name and time, so
one agent's counter over a range is one index range) and its own schema version table
(``series_schema_version``). A flush is one transaction of upserts (``value = value + ?``), run
whole on the store's own thread.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from carrier._sqlite_thread import SQLiteThread, immediate
from carrier.series.base import NameFilter, SeriesStore
from carrier.series.model import Row, Step
from carrier.types import utcnow

__all__ = ["SERIES_MIGRATIONS", "SQLiteSeriesStore"]

log = logging.getLogger(__name__)

SERIES_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE series_counters (
            step TEXT NOT NULL,
            agent TEXT NOT NULL,
            name TEXT NOT NULL,
            t INTEGER NOT NULL,
            value REAL NOT NULL,
            PRIMARY KEY (step, agent, name, t)
        ) WITHOUT ROWID""",
        "CREATE INDEX series_counters_time ON series_counters (step, t)",
    ),
)
"""Step ``i`` (0-based) brings a file to version ``i + 1``. Append only."""

_UPSERT = (
    "INSERT INTO series_counters (step, agent, name, t, value) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (step, agent, name, t) DO UPDATE SET value = value + excluded.value"
)


class SQLiteSeriesStore(SeriesStore):
    """The counters in a SQLite file (usually ``<data_dir>/carrier.db``)."""

    def __init__(self, *, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._thread = SQLiteThread(
            path=self.path,
            version_table="series_schema_version",
            migrations=SERIES_MIGRATIONS,
            stamp=lambda: utcnow().isoformat(),
            name="series store",
            tables="series tables",
            opener="SQLiteSeriesStore",
            logger=log,
        )

    def __repr__(self) -> str:
        return f"SQLiteSeriesStore(path={str(self.path)!r})"

    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    async def schema_version(self) -> int:
        rows = await self._thread.run(
            "reading the schema version",
            lambda db: db.execute("SELECT MAX(version) FROM series_schema_version").fetchall(),
        )
        return int(rows[0][0] or 0)

    async def _add(self, rows: Sequence[Row]) -> None:
        params = [(str(r.step), r.agent, r.name, r.t, float(r.value)) for r in rows]

        def write(db: sqlite3.Connection) -> None:
            with immediate(db):
                db.executemany(_UPSERT, params)

        await self._thread.run(f"adding {len(params)} counters", write)

    async def _select(
        self, step: Step, start: int, end: int, agents: Sequence[str] | None, names: NameFilter
    ) -> list[Row]:
        clauses = ["step = ?", "t >= ?", "t < ?"]
        params: list[Any] = [str(step), start, end]
        if agents is not None:
            if not agents:
                return []
            clauses.append(f"agent IN ({', '.join('?' * len(agents))})")
            params += list(agents)
        exact, ranges = names
        wanted = []
        if exact:
            wanted.append(f"name IN ({', '.join('?' * len(exact))})")
            params += list(exact)
        for low, high in ranges:
            wanted.append("(name >= ? AND name < ?)")
            params += [low, high]
        clauses.append(f"({' OR '.join(wanted)})")
        sql = f"SELECT t, agent, name, value FROM series_counters WHERE {' AND '.join(clauses)}"
        found = await self._thread.run(
            "reading counters", lambda db: db.execute(sql, params).fetchall()
        )
        return [Row(step, int(t), agent, name, float(value)) for t, agent, name, value in found]

    async def _delete_before(self, step: Step, t: int) -> int:
        def delete(db: sqlite3.Connection) -> int:
            cursor = db.execute(
                "DELETE FROM series_counters WHERE step = ? AND t < ?", (str(step), t)
            )
            return int(cursor.rowcount)

        return await self._thread.run(f"pruning {step} counters", delete)
