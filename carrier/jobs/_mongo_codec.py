"""How jobs and schedules are laid out as MongoDB documents (internal to the MongoDB job store).

A job document holds every field of :class:`~carrier.jobs.model.Job` at the top level, so that a
claim can be one ``find_one_and_update`` with plain update operators (``$set`` the lease, ``$inc``
the attempts, ``$push`` the history event) instead of a read and a write.

- Times: integer microseconds since the epoch, UTC (``<name>_us``), as in SQLite's job tables:
  comparisons are exact (BSON dates hold milliseconds). No BSON date copies as the memory store
  keeps: they would slow every claim on servers that scan documents (SecantusDB decodes each).
- ``payload``, ``result`` and ``progress`` are JSON text: any JSON the SQLite store takes (keys
  with ``$`` or ``.``, integers wider than 64 bits) round-trips unchanged.
- ``v``: a version, bumped by every write; a read-modify-write writes only over the version it
  read (compare-and-set). ``seq``: an ObjectId made on insert, the tie-breaker of equal times.
- ``slot``: while a job is held under a concurrency limit, which of the limit's slots it takes
  (unique, see :func:`slot_name`); removed when the job stops being held.

A schedule document keeps the user's definition as JSON text and its progress (``next_us``,
``finished``) beside it, so advancing it is one conditional update on ``next_us``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId

from carrier.jobs.model import ACTIVE_STATES, HISTORY_LIMIT, Job, JobEvent, JobState
from carrier.jobs.schedule import Schedule
from carrier.jobs.transitions import TAKEOVER_NOTE
from carrier.types import from_us, to_us

__all__ = [
    "CLAIM_ORDER",
    "HELD",
    "NEWEST_FIRST",
    "SLOT",
    "VERSION",
    "active_filter",
    "claim_update",
    "due_filter",
    "expired_filter",
    "from_us",
    "job_doc",
    "job_fields",
    "job_from_doc",
    "lost_filter",
    "schedule_doc",
    "schedule_from_doc",
    "schedule_progress",
    "slot_name",
    "stale_slot_filter",
    "takeover_update",
    "to_us",
]

Document = dict[str, Any]

VERSION = "v"
SLOT = "slot"
HELD = sorted(str(state) for state in ACTIVE_STATES)
CLAIM_ORDER = [("run_us", 1), ("created_us", 1), ("seq", 1)]
"""Due first, then oldest: the order SQLite claims in."""
NEWEST_FIRST = [("created_us", -1), ("seq", -1)]


def _stamp(name: str, value: datetime | None) -> Document:
    return {f"{name}_us": to_us(value) if value is not None else None}


def _time(doc: Mapping[str, Any], name: str) -> datetime | None:
    value = doc.get(f"{name}_us")
    return from_us(value) if value is not None else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- jobs --------------------------------------------------------------------------------------
def _event_doc(event: JobEvent) -> Document:
    return {
        "at_us": to_us(event.at),
        "state": str(event.state),
        "note": event.note,
        "worker": event.worker,
    }


def job_fields(job: Job) -> Document:
    """Every field of ``job`` as stored (the ``$set`` of a read-modify-write)."""
    data = job.model_dump(mode="json", include={"payload", "result", "progress"})
    return {
        "kind": job.kind,
        "agent_id": job.agent_id,
        "state": str(job.state),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "crashes": job.crashes,
        "max_crashes": job.max_crashes,
        **_stamp("run", job.run_at),
        "lease_owner": job.lease_owner,
        **_stamp("lease_expires", job.lease_expires_at),
        "last_error": job.last_error,
        "idempotency_key": job.idempotency_key,
        "timeout_s": job.timeout_s,
        **_stamp("approved", job.approved_at),
        **_stamp("approval_expires", job.approval_expires_at),
        **_stamp("created", job.created_at),
        **_stamp("updated", job.updated_at),
        "payload": _json(data["payload"]),
        "result": _json(data["result"]) if job.result is not None else None,
        "progress": _json(data["progress"]) if job.progress is not None else None,
        "committed": job.committed,
        "history": [_event_doc(event) for event in job.history],
    }


def job_doc(job: Job) -> Document:
    """A new job's document."""
    return {"_id": job.id, **job_fields(job), "seq": ObjectId(), VERSION: 1}


def job_from_doc(doc: Mapping[str, Any]) -> Job:
    result = doc.get("result")
    progress = doc.get("progress")
    return Job(
        id=doc["_id"],
        kind=doc["kind"],
        agent_id=doc.get("agent_id"),
        payload=json.loads(doc["payload"]),
        state=JobState(doc["state"]),
        attempts=doc["attempts"],
        max_attempts=doc["max_attempts"],
        crashes=doc.get("crashes", 0),
        max_crashes=doc.get("max_crashes", Job.model_fields["max_crashes"].default),
        run_at=from_us(doc["run_us"]),
        lease_owner=doc.get("lease_owner"),
        lease_expires_at=_time(doc, "lease_expires"),
        last_error=doc.get("last_error"),
        result=json.loads(result) if result is not None else None,
        progress=json.loads(progress) if progress is not None else None,
        committed=bool(doc.get("committed", False)),
        idempotency_key=doc.get("idempotency_key"),
        timeout_s=doc.get("timeout_s"),
        approved_at=_time(doc, "approved"),
        approval_expires_at=_time(doc, "approval_expires"),
        created_at=from_us(doc["created_us"]),
        updated_at=from_us(doc["updated_us"]),
        history=[
            JobEvent(
                at=from_us(event["at_us"]),
                state=JobState(event["state"]),
                note=event.get("note"),
                worker=event.get("worker"),
            )
            for event in doc.get("history") or []
        ],
    )


# -- claiming ----------------------------------------------------------------------------------
def _crash_budget_left(left: bool) -> Document:
    return {"$expr": {"$lt" if left else "$gte": ["$crashes", "$max_crashes"]}}


def due_filter(kinds: Sequence[str], now: datetime) -> Document:
    """Pending jobs that are due: :func:`claim_update` starts an attempt of one."""
    return {
        "kind": {"$in": list(kinds)},
        "state": str(JobState.PENDING),
        "run_us": {"$lte": to_us(now)},
    }


def expired_filter(kinds: Sequence[str], now: datetime) -> Document:
    """Jobs held under an expired lease with crash budget left: :func:`takeover_update` takes
    one over (the others fail instead, see :func:`lost_filter`)."""
    return {
        "kind": {"$in": list(kinds)},
        "state": {"$in": HELD},
        "lease_expires_us": {"$lte": to_us(now)},
        **_crash_budget_left(True),
    }


def lost_filter(kinds: Sequence[str], now: datetime) -> Document:
    """Jobs held under an expired lease that used up their crash budget: a claim fails them."""
    return {
        "kind": {"$in": list(kinds)},
        "state": {"$in": HELD},
        "lease_expires_us": {"$lte": to_us(now)},
        **_crash_budget_left(False),
    }


def active_filter(kinds: Sequence[str], now: datetime) -> Document:
    """Jobs of ``kinds`` held under a live lease (what ``count_active`` counts)."""
    return {
        "kind": {"$in": list(kinds)},
        "state": {"$in": HELD},
        "lease_expires_us": {"$gt": to_us(now)},
    }


def _lease_update(
    worker_id: str, now: datetime, lease_s: float, slot: str | None, *, note: str | None, inc: str
) -> Document:
    expires = now + timedelta(seconds=lease_s)
    event = JobEvent(at=now, state=JobState.CLAIMED, note=note, worker=worker_id)
    update: Document = {
        "$set": {
            "state": str(JobState.CLAIMED),
            "lease_owner": worker_id,
            **_stamp("lease_expires", expires),
            **_stamp("updated", now),
        },
        "$inc": {inc: 1, VERSION: 1},
        "$push": {"history": {"$each": [_event_doc(event)], "$slice": -HISTORY_LIMIT}},
    }
    if slot is not None:
        update["$set"][SLOT] = slot
    return update


def claim_update(worker_id: str, now: datetime, lease_s: float, slot: str | None) -> Document:
    """:func:`carrier.jobs.transitions.claim` of a due pending job (an attempt counted), as
    update operators (``tests/jobs/test_mongo_store.py`` checks that both give the same job)."""
    return _lease_update(worker_id, now, lease_s, slot, note=None, inc="attempts")


def takeover_update(worker_id: str, now: datetime, lease_s: float, slot: str | None) -> Document:
    """:func:`carrier.jobs.transitions.claim` of a job under an expired lease with crash budget
    left (a crash counted, not an attempt), as update operators."""
    return _lease_update(worker_id, now, lease_s, slot, note=TAKEOVER_NOTE, inc="crashes")


def slot_name(kinds: Sequence[str], index: int) -> str:
    """Slot ``index`` of the concurrency limit over ``kinds``: a unique index lets one held job
    take it, so racing claims cannot exceed the limit."""
    return f"{index}:{_json(sorted(set(kinds)))}"


def stale_slot_filter(slot: str, now: datetime) -> Document:
    """A job still marked with ``slot`` that no longer holds it: its lease lapsed (a job that
    stops being held drops its slot as it changes state)."""
    return {
        SLOT: slot,
        "$or": [{"state": {"$nin": HELD}}, {"lease_expires_us": {"$lte": to_us(now)}}],
    }


# -- schedules ---------------------------------------------------------------------------------
def schedule_progress(next_at: datetime | None, finished: bool, updated_at: datetime) -> Document:
    return {**_stamp("next", next_at), "finished": finished, **_stamp("updated", updated_at)}


def schedule_doc(schedule: Schedule) -> Document:
    """The stored fields of a schedule (``_id`` and version aside)."""
    return {
        "definition": _json(schedule.definition()),
        **schedule_progress(schedule.next_at, schedule.finished, schedule.updated_at),
        **_stamp("created", schedule.created_at),
    }


def schedule_from_doc(doc: Mapping[str, Any]) -> Schedule:
    return Schedule.model_validate(
        {
            **json.loads(doc["definition"]),
            "next_at": _time(doc, "next"),
            "finished": doc["finished"],
            "created_at": from_us(doc["created_us"]),
            "updated_at": from_us(doc["updated_us"]),
        }
    )
