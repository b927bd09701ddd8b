"""The AuditLog: an append-only record of what was done to Carrier's agents, and by whom.

A backend implements four primitives (insert one event, select a page, delete what is older than
a time, read its schema version); everything a caller uses is built on them here, so both
backends behave alike and pass ``tests/security/test_audit.py``. There is no update and no
delete of an entry: the only way out is age, :meth:`AuditLog.expire`, which the daily retention
job calls with ``CARRIER_AUDIT_RETENTION_DAYS`` and which never takes an entry younger than a day.

Usage::

    audit = AuditLog.from_settings(settings)   # MongoDB if CARRIER_MONGODB_URI is set
    async with audit:
        await audit.record(AuditKind.AGENT_START, actor="admin", agent_id=agent_id)
        page = await audit.list_events(AuditFilter(agent_id=agent_id), limit=50)

Code that runs without one (tests, ``carrier chat``) gets :data:`NULL_AUDIT` from
:func:`audit_from`, which records nothing.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from carrier.audit._scrub import scrub
from carrier.audit.model import (
    AuditEvent,
    AuditFilter,
    AuditPage,
    AuditResult,
    decode_cursor,
    encode_cursor,
    micros,
)
from carrier.types import utcnow

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = ["MIN_KEEP", "NULL_AUDIT", "AuditLog", "NullAuditLog", "audit_from"]

log = logging.getLogger(__name__)

MIN_KEEP = timedelta(days=1)
"""No entry younger than this is ever deleted, whatever the retention says (the SQLite table
refuses it too)."""

MAX_PAGE = 1000


class AuditLog(ABC):
    """The audit log of every agent. Coroutine-safe; several processes may share one database."""

    def __init__(self) -> None:
        self.failures = 0
        """Events :meth:`record` could not store (each is logged at ERROR)."""

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    async def open(self) -> None:
        """Connect; create the table or collection and indexes idempotently; migrate."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def schema_version(self) -> int: ...

    # -- backend primitives ----------------------------------------------------------------
    @abstractmethod
    async def _insert(self, event: AuditEvent) -> None:
        """Store a new event (already scrubbed)."""

    @abstractmethod
    async def _select(
        self, where: AuditFilter, *, after: tuple[int, str] | None, limit: int
    ) -> list[AuditEvent]:
        """Up to ``limit`` events matching ``where``, newest first (by time, then id), older
        than the ``(at_us, id)`` of ``after`` when given."""

    @abstractmethod
    async def _delete_before(self, at_us: int) -> int:
        """Delete the events older than ``at_us``; how many went."""

    # -- what callers use ------------------------------------------------------------------
    async def append(self, event: AuditEvent) -> AuditEvent:
        """Store ``event`` as it may be stored (strings redacted, detail bounded) and return
        that. Raises :class:`~carrier.errors.StoreError` when the database fails."""
        stored = scrub(event)
        await self._insert(stored)
        return stored

    async def record(
        self,
        kind: str,
        *,
        actor: str | None = None,
        agent_id: str | None = None,
        action: str = "",
        target: str | None = None,
        result: str = AuditResult.OK,
        detail: Mapping[str, Any] | None = None,
        at: datetime | None = None,
    ) -> AuditEvent | None:
        """Append an event and never raise: what it records has happened already, so a database
        failure is logged and counted (:attr:`failures`) rather than undoing or hiding it.
        Returns the stored event, or None when it could not be stored."""
        try:
            event = AuditEvent(
                at=at if at is not None else utcnow(),
                kind=kind,
                actor=actor,
                agent_id=agent_id,
                action=action,
                target=target,
                result=result,
                detail=dict(detail or {}),
            )
            return await self.append(event)
        except Exception:
            self.failures += 1
            log.exception("audit: a %s event of agent %s was not recorded", kind, agent_id)
            return None

    async def list_events(
        self, where: AuditFilter | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> AuditPage:
        """Events matching ``where``, newest first, ``limit`` at a time; pass the page's
        ``next_cursor`` as ``cursor`` for the next (older) page. :class:`ValueError` for a
        cursor that is not one."""
        limit = max(1, min(limit, MAX_PAGE))
        after = decode_cursor(cursor) if cursor else None
        found = await self._select(where or AuditFilter(), after=after, limit=limit + 1)
        items = found[:limit]
        more = len(found) > limit
        return AuditPage(items=items, next_cursor=encode_cursor(items[-1]) if more else None)

    async def expire(self, before: datetime, *, now: datetime | None = None) -> int:
        """Delete the entries older than ``before`` (retention of the log itself); never one
        younger than :data:`MIN_KEEP`. Returns how many went."""
        latest = (now or utcnow()) - MIN_KEEP
        return await self._delete_before(micros(min(before, latest)))

    # -- construction ----------------------------------------------------------------------
    @staticmethod
    def from_settings(settings: Settings) -> AuditLog:
        """The log beside the store the settings name: a collection of the MongoDB database when
        ``CARRIER_MONGODB_URI`` is set, else a table of ``<data_dir>/carrier.db``. Not opened."""
        if settings.mongodb_uri is not None:
            from carrier.audit.mongo import MongoAuditLog

            return MongoAuditLog.from_url(settings.mongodb_uri.get_secret_value())
        from carrier.audit.sqlite import SQLiteAuditLog

        return SQLiteAuditLog(path=settings.store_path)


class NullAuditLog(AuditLog):
    """Records nothing, finds nothing: for code that runs without an audit log."""

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def schema_version(self) -> int:
        return 0

    async def _insert(self, event: AuditEvent) -> None:
        return None

    async def _select(
        self, where: AuditFilter, *, after: tuple[int, str] | None, limit: int
    ) -> list[AuditEvent]:
        return []

    async def _delete_before(self, at_us: int) -> int:
        return 0


NULL_AUDIT: AuditLog = NullAuditLog()


def audit_from(services: Mapping[str, Any]) -> AuditLog:
    """The host's audit log among ``services`` (``manager.services``, ``runtime.services``), or
    :data:`NULL_AUDIT` when it runs without one."""
    audit = services.get("audit")
    return audit if isinstance(audit, AuditLog) else NULL_AUDIT
