"""Audit log fixtures for the audit and retention tests: every test that takes ``audit_factory``
or ``audit`` (imported by ``tests/security/conftest.py``) runs once per backend, SQLite (a file) and MongoDB (a fresh database on the
MongoDB-compatible server ``tests/memory/conftest.py`` starts on loopback, and on a real MongoDB
when ``CARRIER_TEST_MONGODB_URI`` is set)."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from carrier.audit import AuditLog, SQLiteAuditLog
from tests.mongo_servers import TEST_MONGODB_URI_ENV, MongoServer

__all__ = ["AuditFactory", "audit", "audit_factory"]


class AuditFactory:
    """Audit logs over one database; ``raw()`` reads what is stored behind the log's back."""

    name: str

    def new_log(self) -> AuditLog:
        raise NotImplementedError

    def raw(self) -> list[dict[str, Any]]:
        """Every stored row or document, as stored."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Drop what a server keeps."""


class SQLiteAudit(AuditFactory):
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "data" / "carrier.db"

    def new_log(self) -> AuditLog:
        return SQLiteAuditLog(path=self.path)

    def raw(self) -> list[dict[str, Any]]:
        with closing(sqlite3.connect(self.path)) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute("SELECT * FROM audit_events")]


class MongoAudit(AuditFactory):
    def __init__(self, name: str, server: MongoServer) -> None:
        self.name = name
        self.server = server
        self.database = f"carrier_audit_test_{uuid.uuid4().hex[:16]}"

    def new_log(self) -> AuditLog:
        from carrier.audit.mongo import MongoAuditLog

        return MongoAuditLog.from_url(self.server.database_uri(self.database))

    def raw(self) -> list[dict[str, Any]]:
        return list(self.server.client[self.database]["audit"].find())

    def cleanup(self) -> None:
        self.server.client.drop_database(self.database)


BACKENDS = ["sqlite", "mongo-compatible"] + (
    ["mongo-real"] if os.environ.get(TEST_MONGODB_URI_ENV) else []
)


@pytest.fixture(params=BACKENDS)
def audit_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AuditFactory]:
    if request.param == "sqlite":
        yield SQLiteAudit(tmp_path)
        return
    server = request.getfixturevalue(
        "mongo_compatible_server" if request.param == "mongo-compatible" else "mongo_real_server"
    )
    factory = MongoAudit(request.param, server)
    yield factory
    factory.cleanup()


@pytest.fixture
async def audit(audit_factory: AuditFactory) -> AsyncIterator[AuditLog]:
    """An open, empty audit log of each backend."""
    async with audit_factory.new_log() as log:
        yield log


def dump(rows: list[dict[str, Any]]) -> str:
    """Everything stored, as one string to search for a secret."""
    return json.dumps(rows, default=str)
