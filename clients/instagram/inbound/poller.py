"""Polling for comments and DMs where Meta cannot deliver webhooks (no public URL).

With ``conversations.poll.enabled``, the Instagram client keeps an ``instagram.poll`` schedule
(``instagram:<agent>:poll``, every ``poll.interval``); each run reads the comments of the
account's newest ``poll.media`` posts with their replies (a reply carries its ``parent_id``),
the comments elsewhere that mention the account where the backend can list them (instagrapi's
activity feed; the Graph API names mentions only by webhook) and the messages of its
conversations, and stores what is new as ``instagram.inbound`` jobs, exactly as the webhook
receiver does: one job per comment id or message id (the same keys), so a comment seen by both
the poller and a webhook, or by two polls, is answered once. Whether a reply between other
people is answered is the policy's to say (:func:`~.policy.decide`).

What is new is decided by a cursor kept in the Store (``instagram:<agent>:poll-cursor``): the
newest time seen, per source. The first run only sets it (what was written before polling began
is not answered); later runs take what is newer than the cursor less a minute of overlap (clock
skew, comments stamped late), the idempotency keys absorbing the overlap. A restart carries on
from the stored cursor. The persona's own comments and messages are skipped.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from carrier.jobs.base import JobStore
from carrier.memory.base import Store
from clients.instagram.graph.api import parse_timestamp
from clients.instagram.graph.conversations import Conversations
from clients.instagram.inbound.events import EventKind, InboundEvent
from clients.instagram.inbound.webhook import INBOUND_JOB_KIND

__all__ = ["OVERLAP", "POLL_JOB_KIND", "poll_once", "poll_schedule_name"]

log = logging.getLogger(__name__)

POLL_JOB_KIND = "instagram.poll"
OVERLAP = timedelta(minutes=1)


def poll_schedule_name(agent_id: str) -> str:
    return f"instagram:{agent_id}:poll"


async def poll_once(
    *,
    api: Conversations,
    store: Store,
    jobs: JobStore,
    agent_id: str,
    media: int,
    now: datetime,
) -> dict[str, Any]:
    """One round: new comments and messages stored as jobs; what it found."""
    key = f"instagram:{agent_id}:poll-cursor"
    cursor: dict[str, Any] = dict(await store.get_setting(key) or {})
    first = not cursor
    found: list[InboundEvent] = []
    newest: dict[str, datetime] = {}
    for post in await api.recent_media(limit=media):
        post_id = str(post["id"])
        for comment in await api.media_comments(post_id):
            event = _comment(api.ig_user_id, post_id, comment)
            if event is not None:
                found.append(event)
    for comment in await api.mentions():
        event = _comment(api.ig_user_id, None, comment, kind=EventKind.MENTION)
        if event is not None:
            found.append(event)
    for conversation in await api.conversations():
        for message in await api.messages(conversation):
            event = _message(api.ig_user_id, message)
            if event is not None:
                found.append(event)
    stored = 0
    before = set(cursor.get("before") or [])
    """Ids the first round saw near its cursor: written before polling began, never answered."""
    for event in found:
        source = _source(event)
        at = event.at or now
        newest[source] = max(newest.get(source, at), at)
        since = _since(cursor.get(source))
        if first or event.own or event.id in before:
            continue
        if since is not None and at <= since - OVERLAP:
            continue
        job = await jobs.enqueue(
            INBOUND_JOB_KIND,
            agent_id=agent_id,
            payload=event.model_dump(mode="json"),
            idempotency_key=event.key,
            max_attempts=5,
            now=now,
        )
        stored += job.created_at == now
    cursor_out: dict[str, Any] = {}
    for source in ("comments", "messages"):
        mark = max([t for t in (newest.get(source), _since(cursor.get(source))) if t], default=now)
        cursor_out[source] = mark.isoformat()
    if first:  # what a later round's overlap would see again: remembered, never answered
        cursor_out["before"] = [
            e.id
            for e in found
            if (e.at or now) > datetime.fromisoformat(cursor_out[_source(e)]) - OVERLAP
        ]
    else:
        cursor_out["before"] = sorted(before)
    await store.set_setting(key, cursor_out)
    if first:
        log.info(
            "instagram poll for %s: cursor set; earlier comments and messages are left", agent_id
        )
    return {"seen": len(found), "stored": stored, "first": first}


def _source(event: InboundEvent) -> str:
    """The cursor an event moves: mentions are comments too."""
    return "messages" if event.kind is EventKind.MESSAGE else "comments"


def _since(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _comment(
    account: str,
    media_id: str | None,
    comment: dict[str, Any],
    *,
    kind: EventKind = EventKind.COMMENT,
) -> InboundEvent | None:
    sender = comment.get("from") or {}
    user_id = str(sender.get("id") or "") or None
    if not comment.get("id"):
        return None
    return InboundEvent(
        kind=kind,
        account_id=account,
        id=str(comment["id"]),
        text=str(comment.get("text") or ""),
        user_id=user_id,
        username=sender.get("username") or comment.get("username"),
        media_id=media_id or str((comment.get("media") or {}).get("id") or "") or None,
        parent_id=str(comment.get("parent_id") or "") or None,
        at=parse_timestamp(str(comment.get("timestamp") or "")),
        own=user_id == account,
    )


def _message(account: str, message: dict[str, Any]) -> InboundEvent | None:
    sender = message.get("from") or {}
    user_id = str(sender.get("id") or "")
    if not message.get("id") or not user_id:
        return None
    return InboundEvent(
        kind=EventKind.MESSAGE,
        account_id=account,
        id=str(message["id"]),
        text=str(message.get("message") or ""),
        user_id=user_id,
        username=sender.get("username"),
        at=parse_timestamp(str(message.get("created_time") or "")),
        own=user_id == account,
    )
