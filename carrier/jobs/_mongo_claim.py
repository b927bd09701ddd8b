"""Claiming jobs in MongoDB without transactions (internal to the MongoDB job store).

Each job is claimed by one ``find_one_and_update``: the filter says what is claimable, the sort
picks the job due first, the update leases it. The server applies it to one document atomically,
so two workers, in any processes, never lease the same job. Jobs whose worker was lost (held
under an expired lease) are taken over first, counting a crash; then due pending jobs are
claimed, counting an attempt.

A concurrency limit (``max_active``) needs more: SQLite counts the live leases and claims in one
transaction, but here another worker could claim between our count and our claim. So each job
claimed under a limit also takes one of ``max_active`` **slots** (a ``slot`` field with a unique
index): of two racing claims for one slot, the server refuses the second, and no more than
``max_active`` jobs are ever held under that limit. A slot frees up when its job stops being held
(``MongoJobStore._modify`` removes it) or its lease lapses (the next limited claim removes it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from carrier.jobs import _mongo_codec as codec
from carrier.jobs import transitions as t
from carrier.jobs.errors import JobStateError
from carrier.jobs.model import ACTIVE_STATES, Job

__all__ = ["claim", "lose", "lost_ids"]

Jobs = AsyncCollection[dict[str, Any]]


async def claim(
    jobs: Jobs,
    worker_id: str,
    kinds: Sequence[str],
    *,
    at: datetime,
    lease_s: float,
    limit: int,
    max_active: int | None,
) -> list[Job]:
    """Lease up to ``limit`` claimable jobs of ``kinds`` to ``worker_id``, due first, keeping
    the jobs of ``kinds`` held under live leases at or below ``max_active``."""
    if max_active is None:
        return await _claim_each(jobs, worker_id, kinds, at, lease_s, [None] * limit, limit)
    active = await jobs.count_documents(codec.active_filter(kinds, at))
    # Counted first, for jobs held without a slot (claimed by a worker with no limit).
    room = min(limit, max_active - active)
    if room <= 0:
        return []
    slots = [codec.slot_name(kinds, i) for i in range(max_active)]
    live = codec.active_filter(kinds, at) | {codec.SLOT: {"$in": slots}}
    taken = {doc[codec.SLOT] for doc in await jobs.find(live, {codec.SLOT: 1}).to_list()}
    free = [slot for slot in slots if slot not in taken]
    return await _claim_each(jobs, worker_id, kinds, at, lease_s, free, room)


async def _claim_each(
    jobs: Jobs,
    worker_id: str,
    kinds: Sequence[str],
    at: datetime,
    lease_s: float,
    slots: Sequence[str | None],
    limit: int,
) -> list[Job]:
    """Claim up to ``limit`` jobs, each taking the next of ``slots`` (``None``: no limit), until
    nothing is claimable. A slot another worker took meanwhile is skipped: the unique index
    refused that claim, so nothing changed."""
    claimed: list[Job] = []
    expired_left = True  # until a takeover finds nothing: then only due jobs are left
    for slot in slots:
        if len(claimed) >= limit:
            break
        if slot is not None:  # a job that no longer holds the slot gives it up
            await jobs.update_many(
                codec.stale_slot_filter(slot, at),
                {"$unset": {codec.SLOT: ""}, "$inc": {codec.VERSION: 1}},
            )
        doc = None
        try:
            if expired_left:
                doc = await jobs.find_one_and_update(
                    codec.expired_filter(kinds, at),
                    codec.takeover_update(worker_id, at, lease_s, slot),
                    sort=codec.CLAIM_ORDER,
                    return_document=ReturnDocument.AFTER,
                )
                expired_left = doc is not None
            if doc is None:
                doc = await jobs.find_one_and_update(
                    codec.due_filter(kinds, at),
                    codec.claim_update(worker_id, at, lease_s, slot),
                    sort=codec.CLAIM_ORDER,
                    return_document=ReturnDocument.AFTER,
                )
        except DuplicateKeyError:
            continue
        if doc is None:
            break
        claimed.append(codec.job_from_doc(doc))
    return claimed


async def lost_ids(jobs: Jobs, kinds: Sequence[str], at: datetime) -> list[str]:
    """Jobs held under an expired lease that used up their crash budget: a claim fails them
    (with :func:`lose`) instead of taking them over."""
    return [
        doc["_id"] for doc in await jobs.find(codec.lost_filter(kinds, at), {"_id": 1}).to_list()
    ]


def lose(at: datetime) -> Callable[[Job], Job]:
    """The change that ends a lost job (failed, or succeeded with a warning if committed) by the
    rule of :func:`carrier.jobs.transitions.claim`; :class:`JobStateError` if it is no longer
    lost (renewed, retried or taken over since)."""

    def change(job: Job) -> Job:
        changed = t.claim(job, worker_id="-", now=at, lease_s=0)  # over budget: it ends
        if changed.state in ACTIVE_STATES:
            raise JobStateError(job.id, job.state, "fail it (its lease is live again)")
        return changed

    return change
