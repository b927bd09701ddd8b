"""How the fleet's records are laid out as MongoDB documents (internal to the MongoDB fleet store).

- Times: integer microseconds since the epoch, UTC (``<name>_us``), as in the SQLite tables and
  the job store: comparisons are exact, and every time comes back timezone-aware.
- A character and a detail are JSON text: any data the SQLite store takes (keys with ``$`` or
  ``.``, integers wider than 64 bits) round-trips unchanged, and a character's keys never meet
  MongoDB's rules for field names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

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
from carrier.types import from_us, to_us

__all__ = [
    "acquirable",
    "acquire_update",
    "change_doc",
    "change_of",
    "desired_of",
    "dumps",
    "import_doc",
    "import_of",
    "lease_of",
    "revision_doc",
    "revision_of",
]

Document = dict[str, Any]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def revision_doc(revision: Revision) -> Document:
    return {
        "agent_id": revision.agent_id,
        "number": revision.number,
        "digest": revision.digest,
        "source": str(revision.source),
        "actor": revision.actor,
        "note": revision.note,
        "created_us": to_us(revision.created_at),
        "character": dumps(revision.character),
    }


def revision_of(doc: Mapping[str, Any]) -> Revision:
    return Revision(
        agent_id=doc["agent_id"],
        number=doc["number"],
        character=json.loads(doc["character"]),
        digest=doc["digest"],
        source=RevisionSource(doc["source"]),
        actor=doc.get("actor"),
        note=doc.get("note"),
        created_at=from_us(doc["created_us"]),
    )


def desired_of(doc: Mapping[str, Any]) -> Desired:
    return Desired(
        agent_id=doc["_id"],
        state=DesiredState(doc["state"]),
        placement=doc.get("placement"),
        actor=doc.get("actor"),
        updated_at=from_us(doc["updated_us"]),
    )


def import_doc(mark: ImportMark) -> Document:
    return {
        "path": mark.path,
        "file_digest": mark.file_digest,
        "revision": mark.revision,
        "at_us": to_us(mark.at),
    }


def import_of(doc: Mapping[str, Any]) -> ImportMark:
    return ImportMark(
        agent_id=doc["_id"],
        path=doc["path"],
        file_digest=doc["file_digest"],
        revision=doc["revision"],
        at=from_us(doc["at_us"]),
    )


def change_doc(
    seq: int, kind: ChangeKind, agent_id: str | None, detail: str, at_us: int
) -> Document:
    return {"_id": seq, "kind": str(kind), "agent_id": agent_id, "detail": detail, "at_us": at_us}


def change_of(doc: Mapping[str, Any]) -> Change:
    return Change(
        seq=doc["_id"],
        kind=ChangeKind(doc["kind"]),
        agent_id=doc.get("agent_id"),
        detail=json.loads(doc["detail"]),
        at=from_us(doc["at_us"]),
    )


def lease_of(doc: Mapping[str, Any]) -> Lease:
    return Lease(
        name=doc["_id"],
        owner=doc["owner"],
        expires_at=from_us(doc["expires_us"]),
        acquired_at=from_us(doc["acquired_us"]),
        renewed_at=from_us(doc["renewed_us"]),
        detail=json.loads(doc["detail"]),
    )


def acquirable(name: str, owner: str, now_us: int) -> Document:
    """The lease ``name`` if ``owner`` may take it now: expired, or its own. (Free, it does not
    exist: the upsert inserts it.)"""
    return {"_id": name, "$or": [{"expires_us": {"$lte": now_us}}, {"owner": owner}]}


def acquire_update(
    owner: str, now_us: int, expires_us: int, detail: dict[str, Any] | None
) -> list[Document]:
    """The lease taken or renewed by ``owner``, as an update pipeline: it keeps ``acquired_us``
    (and, without a new ``detail``, the detail) of a holding that goes on, and starts them anew
    for a lease taken over or inserted. Values are ``$literal`` so no text reads as a field."""
    mine = {"$eq": ["$owner", {"$literal": owner}]}
    goes_on = {"$and": [mine, {"$gt": ["$expires_us", now_us]}]}
    kept_detail = {"$cond": [mine, {"$ifNull": ["$detail", "{}"]}, {"$literal": "{}"}]}
    return [
        {
            "$set": {
                "acquired_us": {"$cond": [goes_on, "$acquired_us", now_us]},
                "detail": kept_detail if detail is None else {"$literal": dumps(detail)},
                "owner": {"$literal": owner},
                "expires_us": expires_us,
                "renewed_us": now_us,
            }
        }
    ]
