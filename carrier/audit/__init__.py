"""The audit log: an append-only record of every state-changing action, in the store's database.

:class:`AuditLog` (SQLite by default, MongoDB with ``CARRIER_MONGODB_URI``) holds
:class:`AuditEvent` entries: API calls that change something (allowed or refused), agent starts
and stops, forgets, retention runs, Instagram publishes and approvals, redactions. No secret is
ever stored in it (every string goes through the redactor first), and nothing in it is changed or
deleted but by age. The host opens it and hands it to agents as ``services["audit"]``; code that
runs without one gets :data:`NULL_AUDIT` from :func:`audit_from`.

Names load on first use, so importing the package costs nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from carrier.audit.base import NULL_AUDIT, AuditLog, NullAuditLog, audit_from
    from carrier.audit.model import AuditEvent, AuditFilter, AuditKind, AuditPage, AuditResult
    from carrier.audit.sqlite import SQLiteAuditLog

_WHERE = {
    "NULL_AUDIT": "base",
    "AuditLog": "base",
    "NullAuditLog": "base",
    "audit_from": "base",
    "AuditEvent": "model",
    "AuditFilter": "model",
    "AuditKind": "model",
    "AuditPage": "model",
    "AuditResult": "model",
    "SQLiteAuditLog": "sqlite",
}

__all__ = [
    "NULL_AUDIT",
    "AuditEvent",
    "AuditFilter",
    "AuditKind",
    "AuditLog",
    "AuditPage",
    "AuditResult",
    "NullAuditLog",
    "SQLiteAuditLog",
    "audit_from",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
