"""The follow-up of a live post whose media id or permalink is not known yet.

A publish whose answer was lost (a dropped connection, a worker killed right after the call) is
found live by its container's status, and its media by the caption among the account's newest
media. When no media list shows it yet (one lags, or the token may read none), the publish job
still succeeds, with a warning, and hands on to an ``instagram.permalink`` job: it looks again,
with backoff, and records the media id and permalink in the post's state and its ``post`` memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from carrier.jobs.handler import JobContext
from carrier.jobs.model import Job
from clients.instagram.drafts import post_memory_id
from clients.instagram.post import Phase, PublishState

if TYPE_CHECKING:
    from clients.instagram.client import InstagramClient

__all__ = [
    "PERMALINK_ATTEMPTS",
    "PERMALINK_JOB_KIND",
    "follow_up",
    "look_up",
    "record_permalink",
]

log = logging.getLogger(__name__)

PERMALINK_JOB_KIND = "instagram.permalink"
PERMALINK_ATTEMPTS = 8
"""Looks before giving up: with the worker's backoff (10 s doubling), about 40 minutes."""


class NotFoundYet(Exception):
    """The post is live, and no media list shows it yet: look again later."""


async def follow_up(job: Job, ctx: JobContext, post_key: str) -> dict[str, Any]:
    """Hand a live post with an unknown media id or permalink on to an ``instagram.permalink``
    job (once per post); what to add to the publish job's result."""
    follow = await ctx.store.enqueue(
        PERMALINK_JOB_KIND,
        agent_id=job.agent_id,
        payload={"post_key": post_key, "publish_job_id": job.id},
        idempotency_key=f"instagram:permalink:{post_key}",
        max_attempts=PERMALINK_ATTEMPTS,
    )
    warning = (
        f"post {post_key} is live, but its media id or permalink is not known yet (no media "
        f"list shows it); job {follow.id} ({PERMALINK_JOB_KIND}) looks it up"
    )
    log.warning("instagram: %s", warning)
    return {"warning": warning, "permalink_job_id": follow.id}


async def look_up(client: InstagramClient, post_key: str) -> PublishState | None:
    """Fill in the media id and permalink of a live post now, if its publisher can; its state
    when both are known, else ``None``."""
    state = await client.states.load(post_key)
    lookup = getattr(client.publisher, "lookup", None)
    if state is None or state.phase is not Phase.PUBLISHED or lookup is None:
        return None

    async def save() -> None:
        await client.states.save(state)

    return state if await lookup(state, save) else None


async def record_permalink(client: InstagramClient, job: Job) -> Mapping[str, Any]:
    """The ``instagram.permalink`` handler: find the live post's media, record it."""
    post_key = str(job.payload.get("post_key") or "")
    state = await client.states.load(post_key)
    if state is None or state.phase is not Phase.PUBLISHED:
        return {"skipped": f"post {post_key!r} is not published"}
    if getattr(client.publisher, "lookup", None) is None:
        return {"skipped": f"the {state.publisher} publisher cannot look posts up"}
    found = await look_up(client, post_key)
    if found is None:
        raise NotFoundYet(
            f"post {post_key} is live (container {state.container_id}), but no media list shows "
            "it yet; looking again later"
        )
    store = client.runtime.store
    memory = await store.get_memory(post_memory_id(client.agent_id, post_key))
    if memory is not None:
        metadata = {
            **memory.content.metadata,
            "media_id": found.media_id,
            "permalink": found.permalink,
        }
        content = memory.content.model_copy(update={"metadata": metadata})
        await store.update_memory(memory.model_copy(update={"content": content}))
    return {"media_id": found.media_id, "permalink": found.permalink, "found_by": found.found_by}
