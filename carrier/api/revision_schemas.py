"""Response bodies of ``/agents/{agent_id}/revisions``: an agent's character versions, a page of
them, and the difference between two. Secret references are never in them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from carrier.agents.diff import CharacterDiff, FieldChange
from carrier.api._secrets import public_character
from carrier.fleet.model import Revision

__all__ = ["DiffOut", "FieldChangeOut", "RevisionOut", "RevisionPage", "RevisionSummary"]


class RevisionSummary(BaseModel):
    """One version of an agent's character, without the character."""

    number: int
    """From 1, one more at each change; never reused for this agent."""
    source: str
    """Where it came from: ``file`` (imported by ``carrier run``), ``api``, ``console``,
    ``cli``, ``revert`` (``POST .../revert``), ``store`` (what a store kept before revisions)."""
    actor: str | None = None
    """Who: the API token's name (``admin``), the file's path, ``cli:<user>``."""
    note: str | None = None
    """E.g. ``revert to revision 3``."""
    digest: str
    """sha256 of the stored character: equal digests, equal characters."""
    created_at: datetime

    @classmethod
    def of(cls, revision: Revision) -> RevisionSummary:
        return cls(**_fields(revision))


class RevisionOut(RevisionSummary):
    character: dict[str, Any]
    """The character (camelCase) as it was, with secret references left out."""

    @classmethod
    def of(cls, revision: Revision) -> RevisionOut:
        return cls(**_fields(revision), character=public_character(revision.character))


def _fields(revision: Revision) -> dict[str, Any]:
    return {
        "number": revision.number,
        "source": revision.source.value,
        "actor": revision.actor,
        "note": revision.note,
        "digest": revision.digest,
        "created_at": revision.created_at,
    }


class RevisionPage(BaseModel):
    items: list[RevisionSummary]
    """Newest first."""
    head: int
    """The agent's current revision (what it runs)."""
    next_before: int | None = None
    """Pass as ``before`` for the next, older page; null on the last page."""


class FieldChangeOut(BaseModel):
    path: str
    """``bio[2]``, ``style.chat[0]``, ``clientConfig.discord.channels``; a removed list item
    has its index in the older character, others their index in the newer one."""
    kind: Literal["added", "removed", "changed"]
    old: Any = None
    """Null when added."""
    new: Any = None
    """Null when removed."""
    secret: bool = False
    """A secret reference: ``old`` and ``new`` say ``(secret reference, not shown)``."""

    @classmethod
    def of(cls, change: FieldChange) -> FieldChangeOut:
        return cls(
            path=change.path,
            kind=change.kind.value,
            old=change.old,
            new=change.new,
            secret=change.secret,
        )


class DiffOut(BaseModel):
    agent_id: str
    from_revision: int | None
    """The older side (``against``); null when ``revision`` is 1 and nothing precedes it."""
    to_revision: int
    changes: list[FieldChangeOut] = Field(default_factory=list)
    """Every changed field, in the characters' order; empty when they are equal."""
    text: str
    """A unified diff of the two characters as YAML, secret references masked."""

    @classmethod
    def of(cls, agent_id: str, older: int | None, newer: int, diff: CharacterDiff) -> DiffOut:
        return cls(
            agent_id=agent_id,
            from_revision=older,
            to_revision=newer,
            changes=[FieldChangeOut.of(c) for c in diff.changes],
            text=diff.text,
        )
