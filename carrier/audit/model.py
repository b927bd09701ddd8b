"""The audit record: who did what to which agent, when, and how it ended.

An :class:`AuditEvent` is written once and never changed (the log is append-only). Its ``kind``
says which part of Carrier wrote it (:class:`AuditKind`); ``detail`` holds a few small facts of
that kind (counts, ids, a status code), never a request's body or headers, and goes through the
redactor before it is stored (see :mod:`carrier.audit._scrub`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from carrier.types import new_id, utcnow

__all__ = [
    "KIND_PATTERN",
    "AuditEvent",
    "AuditFilter",
    "AuditKind",
    "AuditPage",
    "AuditResult",
    "decode_cursor",
    "encode_cursor",
    "micros",
]

KIND_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"
"""``area.action``: lower case words joined by dots (``api.call``, ``instagram.publish``)."""


class AuditKind(StrEnum):
    """The kinds Carrier writes. Others may be added (``area.action``); these names stay."""

    API_CALL = "api.call"
    """A state-changing API request (POST, PUT, PATCH, DELETE), allowed or refused: the token's
    name, method, route template, agent id and status code."""
    AGENT_START = "agent.start"
    AGENT_STOP = "agent.stop"
    CHARACTER_REVISION = "character.revision"
    """A character was changed (a new revision of an agent)."""
    TOOL_CALL = "tool.call"
    """A registered tool was called by a model."""
    TOOL_APPROVAL = "tool.approval"
    """A parked tool call was approved or rejected by a human."""
    MEMORY_FORGET = "memory.forget"
    """Everything an agent kept of one person was deleted."""
    MEMORY_PRUNE = "memory.prune"
    """A retention run (scheduled, or ``carrier memory prune``) deleted old data; counts."""
    INSTAGRAM_PUBLISH = "instagram.publish"
    """A post went out on Instagram (or failed for good)."""
    INSTAGRAM_APPROVAL = "instagram.approval"
    """An Instagram draft was approved or rejected."""
    SAFETY_REDACTION = "safety.redaction"
    """The redactor replaced secrets in something leaving Carrier; counts, never the values."""


class AuditResult(StrEnum):
    """How it ended, in one word (the detail says more)."""

    OK = "ok"
    REFUSED = "refused"
    """Not allowed or not valid: 4xx, a rejected draft."""
    FAILED = "failed"
    """It was allowed and went wrong: 5xx, a publish that failed for good."""


def micros(when: datetime) -> int:
    """Microseconds since the epoch (UTC): the exact, sortable time the stores index."""
    aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class AuditEvent(BaseModel):
    """One entry of the audit log."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id)
    at: datetime = Field(default_factory=utcnow)
    """When it happened (UTC)."""
    kind: str = Field(pattern=KIND_PATTERN, max_length=64)
    """An :class:`AuditKind` value (or another ``area.action`` name)."""
    actor: str | None = Field(default=None, max_length=200)
    """Who: ``admin`` (the admin token), ``token:<name>`` (a per-agent token), ``anonymous`` (no
    valid token), ``cli:<user>`` for a command, ``discord:<user> (<id>)``, ``system`` for a
    scheduled job."""
    agent_id: str | None = Field(default=None, max_length=200)
    action: str = Field(default="", max_length=300)
    """What, in a few words: ``POST /agents/{agent_id}/start``, ``start``, ``forget``."""
    target: str | None = Field(default=None, max_length=300)
    """What it acted on: an entity id, a job id, a route."""
    result: str = Field(default=AuditResult.OK, max_length=32)
    """An :class:`AuditResult` value."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """Small facts of this kind (counts, ids, a status code). Never bodies, headers or secrets:
    strings in it are redacted before the event is stored."""

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class AuditFilter:
    """Which events to read; every filter given must match. Times: ``since`` inclusive, ``until``
    exclusive."""

    agent_id: str | None = None
    actor: str | None = None
    kinds: tuple[str, ...] = field(default=())
    """Any of these kinds; empty: every kind."""
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class AuditPage:
    """Events, newest first, and the cursor of the next (older) page, None at the end."""

    items: list[AuditEvent]
    next_cursor: str | None = None


def encode_cursor(event: AuditEvent) -> str:
    """An opaque cursor: the page after it starts with the next older event."""
    raw = f"{micros(event.at)}:{event.id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(at_us, id)`` of the event a cursor points after; :class:`ValueError` if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        at, _, event_id = raw.partition(":")
        if not event_id:
            raise ValueError
        return int(at), event_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError(
            f"not an audit cursor: {cursor[:40]!r}; pass the next_cursor of a page"
        ) from None
