"""The fleet's records: revisions, desired states, import marks, changes and leases."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from carrier.types import utcnow

__all__ = [
    "Change",
    "ChangeKind",
    "Desired",
    "DesiredState",
    "ImportMark",
    "Lease",
    "Revision",
    "RevisionSource",
    "character_digest",
]


def character_digest(character: dict[str, Any]) -> str:
    """A stable digest of a character's stored data (camelCase JSON): equal data, equal digest,
    whatever the key order."""
    text = json.dumps(character, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RevisionSource(StrEnum):
    FILE = "file"
    """Imported from a character file by ``carrier run``; the actor is the file's path."""
    API = "api"
    """``POST``/``PUT /agents``; the actor is the token's name."""
    CONSOLE = "console"
    """The web console (an API call it made); the actor is the token's name."""
    CLI = "cli"
    """A command (``carrier agents revert``); the actor is ``cli:<user>``."""
    REVERT = "revert"
    """A revert through the API; the note names the revision brought back."""
    STORE = "store"
    """What a store written before revisions existed held (recorded once, on upgrade)."""


class Revision(BaseModel):
    """One version of an agent's character. Numbers start at 1 and never repeat for an agent."""

    agent_id: str
    number: int
    character: dict[str, Any]
    digest: str
    source: RevisionSource
    actor: str | None = None
    note: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class DesiredState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"


class Desired(BaseModel):
    """What should run of an agent, whatever runs now. Every process applies it."""

    agent_id: str
    state: DesiredState
    placement: str | None = None
    """Which workers may run its platform clients: None, any worker; else only workers started
    with that group (``carrier run --group NAME``)."""
    actor: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)


class ImportMark(BaseModel):
    """The last import of a character file: which file content matched which revision. A file
    whose digest equals the mark's is unchanged since; a head past the mark's revision was
    changed elsewhere."""

    agent_id: str
    path: str
    file_digest: str
    revision: int
    at: datetime = Field(default_factory=utcnow)


class ChangeKind(StrEnum):
    CHARACTER = "character"
    """A new revision (create, edit, import, revert)."""
    DESIRED = "desired"
    """A start or a stop, or a new placement."""
    CLIENT_CONFIG = "client_config"
    """A stored client configuration; ``agent_id`` None when it applies to every agent."""
    DELETED = "deleted"
    """The agent is gone."""
    UPLOADS = "uploads"
    """Media were uploaded for the agent in a process that does not publish them (the web):
    the process running its publisher queues them."""


class Change(BaseModel):
    """One entry of the change log. ``seq`` grows strictly in the order entries were written."""

    seq: int
    kind: ChangeKind
    agent_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    at: datetime = Field(default_factory=utcnow)


class Lease(BaseModel):
    """A named right held by one process until ``expires_at`` unless renewed (its heartbeat)."""

    name: str
    owner: str
    expires_at: datetime
    acquired_at: datetime
    renewed_at: datetime
    detail: dict[str, Any] = Field(default_factory=dict)
