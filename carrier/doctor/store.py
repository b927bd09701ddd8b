"""The store: the SQLite file in the data dir, or the MongoDB server ``CARRIER_MONGODB_URI`` names.

The doctor never migrates: it reads the schema versions first (the store's and the job store's),
fails on one newer than this Carrier knows, and opens the store (for the agents and client
settings kept there) only when its schema is the one this Carrier writes, so a check run before an
upgrade leaves the data as older workers need it. The job store is not opened at all.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from carrier.doctor.base import Result, fail, ok, skip
from carrier.errors import ConfigError, StoreError
from carrier.memory.base import Store
from carrier.settings import Settings

__all__ = ["StoreCheck", "check_store"]

NAME = "store"
_UPGRADE = "upgrade Carrier to the version that wrote it"


@dataclass
class StoreCheck:
    """The store's result, and the store itself when it could be opened as it is."""

    result: Result
    store: Store | None = None
    secrets: list[str] = field(default_factory=list)
    """Values to keep out of every message (the MongoDB password)."""
    _client: Any = None

    async def aclose(self) -> None:
        try:
            if self.store is not None:
                await self.store.close()
        finally:
            if self._client is not None:
                await self._client.close()


def _versions(current: int, stored: int, jobs_current: int, jobs_stored: int) -> str | None:
    """Why the stored schema versions cannot be used by this Carrier, or None."""
    if stored > current:
        return f"schema version {stored} is newer than this Carrier supports ({current})"
    if jobs_stored > jobs_current:
        return (
            f"job schema version {jobs_stored} is newer than this Carrier supports ({jobs_current})"
        )
    return None


def _schema_note(current: int, stored: int) -> str:
    if stored == 0:
        return "a new store: carrier run sets it up"
    if stored < current:
        return f"schema {stored}: carrier run migrates it to {current}"
    return f"schema {stored}"


async def check_store(settings: Settings, *, wait: float) -> StoreCheck:
    """``wait``: seconds a connection may take (and a locked SQLite file may be waited for)."""
    if settings.mongodb_uri is not None:
        return await _mongo(settings.mongodb_uri.get_secret_value(), wait=wait)
    return await _sqlite(settings.store_path, wait=wait)


# -- SQLite ---------------------------------------------------------------------------------------


def _sqlite_versions(path: Path, timeout: float) -> tuple[int, int] | None:
    """(store schema, job schema) recorded in the file, read through a read-only connection;
    None when there is no file yet."""
    if not path.exists():
        return None
    uri = path.absolute().as_uri() + "?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=timeout)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and not tables & {"schema_version", "jobs_schema_version"}:
            raise sqlite3.DatabaseError("it has tables, but none of Carrier's")
        found = []
        for table in ("schema_version", "jobs_schema_version"):
            row = (
                db.execute(f"SELECT MAX(version) FROM {table}").fetchone()
                if table in tables
                else None
            )
            found.append(int(row[0] or 0) if row is not None else 0)
    return found[0], found[1]


async def _sqlite(path: Path, *, wait: float) -> StoreCheck:
    from carrier.jobs.sqlite import JOBS_SCHEMA_VERSION
    from carrier.memory.sqlite import SCHEMA_VERSION, SQLiteStore

    elsewhere = "or set CARRIER_DATA_DIR to another directory"
    try:
        versions = await asyncio.to_thread(_sqlite_versions, path, wait)
    except sqlite3.Error as exc:
        return StoreCheck(
            fail(
                NAME,
                f"SQLite {path} cannot be read as a Carrier store ({exc})",
                f"check its permissions; if it is not Carrier's, move it away, {elsewhere}",
            )
        )
    if versions is None:
        return StoreCheck(ok(NAME, f"SQLite {path} does not exist yet; carrier run creates it"))
    stored, jobs = versions
    problem = _versions(SCHEMA_VERSION, stored, JOBS_SCHEMA_VERSION, jobs)
    if problem:
        return StoreCheck(fail(NAME, f"SQLite {path}: {problem}", f"{_UPGRADE}, {elsewhere}"))
    detail = f"SQLite {path}: {_schema_note(SCHEMA_VERSION, stored)}"
    if stored != SCHEMA_VERSION:
        return StoreCheck(ok(NAME, detail))
    store = SQLiteStore(path=path)
    try:
        await store.open()
    except StoreError as exc:
        return StoreCheck(fail(NAME, str(exc), f"check the file's permissions, {elsewhere}"))
    return StoreCheck(ok(NAME, detail), store=store)


# -- MongoDB --------------------------------------------------------------------------------------


def _with_timeout(uri: str, timeout: float) -> str:
    """``uri`` with server selection and connection timeouts of ``timeout`` unless it sets them."""
    parts = urlsplit(uri)
    query = parts.query
    for option in ("serverSelectionTimeoutMS", "connectTimeoutMS"):
        if option.lower() not in query.lower():
            query = (
                f"{query}&{option}={int(timeout * 1000)}"
                if query
                else f"{option}={int(timeout * 1000)}"
            )
    return urlunsplit(parts._replace(query=query))


async def _mongo(uri: str, *, wait: float) -> StoreCheck:
    from carrier._mongo import connection, translated
    from carrier.jobs._mongo_schema import JOBS_SCHEMA_VERSION
    from carrier.jobs._mongo_schema import stored_version as jobs_stored_version
    from carrier.memory._mongo_schema import SCHEMA_VERSION, detect_vector_search, stored_version
    from carrier.memory.mongo import MongoStore

    fix_uri = "fix CARRIER_MONGODB_URI (mongodb://user:password@host:27017/carrier)"
    try:
        conn = connection(_with_timeout(uri, wait), appname="carrier-doctor")
        client = conn.client()
    except ConfigError as exc:
        return StoreCheck(fail(NAME, str(exc).partition("; ")[0], fix_uri))
    check = StoreCheck(skip(NAME, ""), secrets=[conn.secret] if conn.secret else [], _client=client)
    reach = (
        f"start the server, check that {conn.where} accepts connections from this machine, and "
        "check the host, user and password in CARRIER_MONGODB_URI"
    )
    try:
        with translated(conn.where, "connecting", conn.secret, store="MongoDB"):
            await client.admin.command("ping")
            info = await client.admin.command("buildInfo")
            db = client[conn.database]
            stored = await stored_version(db)
            jobs = await jobs_stored_version(db)
            has_memories = "memories" in await db.list_collection_names()
    except StoreError as exc:
        check.result = fail(NAME, str(exc), reach)
        return check
    server = f"MongoDB {info.get('version', 'of unknown version')}"
    problem = _versions(SCHEMA_VERSION, stored, JOBS_SCHEMA_VERSION, jobs)
    if problem:
        check.result = fail(
            NAME,
            f"{conn.where} ({server}): {problem}",
            f"{_UPGRADE}, or point CARRIER_MONGODB_URI at another database",
        )
        return check
    note = _schema_note(SCHEMA_VERSION, stored)
    try:
        with translated(conn.where, "checking for $vectorSearch", conn.secret, store="MongoDB"):
            if stored == SCHEMA_VERSION:
                # Opening detects $vectorSearch itself; the store then serves the later checks.
                store = MongoStore(client=client, database=conn.database)
                await store.open()
                check.store, vector = store, store.supports_vector_search
            elif has_memories:
                vector = await detect_vector_search(db)
            else:
                vector = None
    except StoreError as exc:
        check.result = fail(NAME, str(exc), reach)
        return check
    search = {
        True: "$vectorSearch: yes",
        False: "$vectorSearch: no (recall uses the in-process vector index)",
        None: "$vectorSearch: checked once the store is set up",
    }[vector]
    check.result = ok(NAME, f"{conn.where}: {server}, {note}; {search}")
    return check
