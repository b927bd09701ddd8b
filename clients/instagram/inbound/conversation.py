"""One inbound event through the pipeline: moderation, policy, the turn, the reply sent once.

A comment, a mention or a DM becomes a :class:`carrier.types.Message` (platform ``instagram``):
a comment's thread (the comment and its replies) is a room (``comment:<first comment's id>``, a
thread under the post's room ``media:<media id>``), a DM thread is a room
(``dm:<person's id>``), the writer is an entity. Turns of one room run one at a time here, so
a reply in a busy thread waits for the one before it rather than superseding it.

Moderation (:mod:`.moderation`) and then the policy (:mod:`.policy`) decide first; a hidden,
flagged or skipped event is stored all the same (``runtime.observe``: ``ignored``, with the
reason). An answered one goes through ``runtime.handle`` (stored before any work, the five
stages), waits for approval when that is on, and its replies go through
``runtime.outbox.deliver`` with a :class:`~.replies.ReplySender`.

Run again (a retry, or a job taken over from a worker that died), it settles what the earlier
run left instead of starting over: the message is found stored (by the id derived from the
platform's), replies a dead worker had claimed are made pending again and sent only if the
platform does not show them yet, a reply failed while its fate was unknown (a send with no
clear answer, a recovery's "too old") is marked sent when the platform shows it (an uncertain
one it does not show is sent again), and a turn cut short before any reply was stored runs
again.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from carrier.jobs.errors import AwaitApproval
from carrier.outbox import INTERRUPTED
from carrier.pipeline.generate import failure_of
from carrier.types import (
    Author,
    Channel,
    Memory,
    MemoryStatus,
    Message,
    RoomKind,
    stable_id,
)
from clients.instagram.errors import GraphAPIError, InstagramError, RetryLater
from clients.instagram.graph.api import UnclearResponse
from clients.instagram.graph.conversations import Conversations
from clients.instagram.inbound.events import EventKind, InboundEvent
from clients.instagram.inbound.moderation import ModerationSettings, Verdict, moderate, record
from clients.instagram.inbound.policy import Caps, ConversationSettings, Decision, decide
from clients.instagram.inbound.replies import UNCERTAIN, OutsideWindow, ReplySender

__all__ = ["PLATFORM", "answer_event", "to_message"]

log = logging.getLogger(__name__)

PLATFORM = "instagram"
HELD = "held for approval: sent only once a human approves it"
_ROOMS: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()


def _room_lock(agent_id: str, room: str) -> asyncio.Lock:
    lock = _ROOMS.get((agent_id, room))
    if lock is None:
        lock = _ROOMS[(agent_id, room)] = asyncio.Lock()
    return lock


_CLOSED = (MemoryStatus.PROCESSED, MemoryStatus.IGNORED, MemoryStatus.SUPERSEDED)


def to_message(event: InboundEvent) -> Message:
    """The event as the pipeline's input."""
    name = event.username or event.user_id or "someone"
    author = Author(platform_id=event.user_id or name, name=name, username=event.username)
    meta: dict[str, Any] = {"kind": event.kind.value, "id": event.id}
    if event.kind is EventKind.MESSAGE:
        channel = Channel(
            platform_id=f"dm:{event.user_id}", name=f"DM with {name}", kind=RoomKind.DM
        )
    else:
        # A comment and its replies are one conversation (a thread), under the post's room:
        # people commenting on one post at once are answered side by side, none superseded.
        media = event.media_id or "unknown"
        channel = Channel(
            platform_id=f"comment:{event.parent_id or event.id}",
            name=f"{name}'s comment on {media}",
            kind=RoomKind.THREAD,
            parent_platform_id=f"media:{media}",
        )
        meta.update(media_id=event.media_id, parent_id=event.parent_id)
    message = Message(
        platform=PLATFORM,
        author=author,
        channel=channel,
        text=event.text,
        platform_message_id=f"{event.kind.value}:{event.id}",
        mentions_agent=event.kind is EventKind.MENTION,
        # A comment on the persona's own post answers the persona.
        replies_to_agent=event.kind is EventKind.COMMENT,
        in_reply_to_platform_id=event.parent_id or event.media_id,
        metadata={"instagram": meta},
    )
    if event.at is not None:
        message.received_at = event.at
    return message


async def answer_event(
    *,
    runtime: Any,
    api: Conversations,
    event: InboundEvent,
    settings: ConversationSettings,
    caps: Caps,
    own_username: str,
    again: bool,
    fence: Any = None,
    moderation: ModerationSettings | None = None,
    approved: str | None = None,
) -> dict[str, Any]:
    """Answer ``event`` once; the job's result. ``again``: an earlier run of this job may have
    done part of it (a retry or a takeover); ``fence``: the job's lease check, called right
    before anything is sent. With ``settings.approval``, the replies wait for a human
    (:class:`~carrier.jobs.errors.AwaitApproval`) unless ``approved`` carries the approved
    reply text (the job was approved, perhaps with an edit)."""
    if event.kind is EventKind.MENTION and not event.text:
        event = await _read_mention(api, event)
    if event.kind is EventKind.MESSAGE and not event.username and event.user_id:
        event = await _name_of(api, event)
    message = to_message(event)
    inbound_id = stable_id(runtime.agent_id, PLATFORM, "message", str(message.platform_message_id))
    stored = await runtime.store.get_memory(inbound_id)
    if stored is not None and stored.status in _CLOSED:
        return {"done": stored.status.value, "message_id": inbound_id}
    if stored is None and moderation is not None:
        verdict = await moderate(event, moderation, settings, model=runtime.model)
        if verdict is not None:
            return await _moderated(runtime, api, event, message, verdict, inbound_id)
    if stored is None:
        decision = decide(event, settings, own_username=own_username)
        if decision.answer:
            over = await caps.take(event, settings)
            if over is not None:
                decision = Decision(False, over)
        if not decision.answer:
            await runtime.observe(message, reason=decision.reason)
            return {"skipped": decision.reason, "message_id": inbound_id}
    replies = await _replies(runtime, message, stored)
    if isinstance(replies, dict):
        return replies
    if settings.approval:
        await _approval(runtime, event, replies, approved, settings)
    sender = ReplySender(
        api,
        event,
        private=settings.reply_as == "private",
        check_first=again or stored is not None,
    )
    if stored is not None:
        await _settle_unknown(runtime, replies, sender)
    unsent = [r for r in replies if r.status is MemoryStatus.PENDING]
    if unsent and fence is not None:
        await fence()
    try:
        await runtime.outbox.deliver(unsent, sender)
    except OutsideWindow as exc:
        log.info("instagram: reply to %s not sent: %s", event.key, exc)
        return {"refused": str(exc), "message_id": inbound_id}
    return {
        "replied": sender.sent,
        "found_on_platform": sender.found,
        "message_id": inbound_id,
        "replies": [r.id for r in replies],
    }


async def _replies(
    runtime: Any, message: Message, stored: Memory | None
) -> list[Memory] | dict[str, Any]:
    """The replies to send: the new turn's, or what an earlier run left (settled)."""
    if stored is not None:
        replies = await runtime.outbox.replies_of(stored.id)
        if replies:
            for reply in replies:
                if reply.status is MemoryStatus.SENDING:  # claimed by a worker that died
                    await runtime.store.set_memory_status(
                        reply.id, MemoryStatus.PENDING, expect=[MemoryStatus.SENDING]
                    )
                    reply.status = MemoryStatus.PENDING
            return replies
        if stored.status is MemoryStatus.FAILED and stored.error == INTERRUPTED:
            # The turn was cut short before any reply was stored: it runs again.
            await runtime.store.set_memory_status(
                stored.id, MemoryStatus.RECEIVED, expect=[MemoryStatus.FAILED]
            )
        elif stored.status is MemoryStatus.FAILED:
            return {"failed": stored.error, "message_id": stored.id}
    # One turn at a time per room from here: a second reply in a thread waits for the first
    # instead of superseding it (each comment is someone's own question).
    async with _room_lock(runtime.agent_id, message.channel.platform_id):
        result = await runtime.handle(message)
    failure = failure_of(result)
    if failure is not None:
        return {
            "failed": result.reason or "the model gave no answer",
            "message_id": result.inbound_id,
        }
    if not result.replies:
        return {
            "status": result.status.value,
            "reason": result.reason,
            "message_id": result.inbound_id,
        }
    return list(result.replies)


async def _approval(
    runtime: Any,
    event: InboundEvent,
    replies: list[Memory],
    approved: str | None,
    settings: ConversationSettings,
) -> None:
    """Park the replies for a human, or take the approved (maybe edited) text.

    While they wait the replies are ``failed`` with :data:`HELD` (and the message with them),
    so nothing sends them (a restart's recovery included) and a rejected or expired one reads
    as never approved; approved, they are made pending again and sent."""
    if approved is None:
        for reply in replies:
            if reply.status is MemoryStatus.PENDING and await runtime.store.set_memory_status(
                reply.id, MemoryStatus.FAILED, error=HELD, expect=[MemoryStatus.PENDING]
            ):
                reply.status = MemoryStatus.FAILED
        inbound = replies[0].content.in_reply_to if replies else None
        if inbound:
            await runtime.outbox.close(inbound)
        raise AwaitApproval(
            reason="the Instagram reply waits for approval",
            payload={
                "reply": "\n\n".join(r.content.text for r in replies),
                "answers": {"kind": event.kind.value, "from": event.username, "text": event.text},
            },
            expires_in_s=settings.approval_expiry,
        )
    if not replies:
        return
    first = replies[0]
    if approved.strip() and approved != "\n\n".join(r.content.text for r in replies):
        first.content.text = approved.strip()
        first.content.metadata["edited_in_approval"] = True
        await runtime.store.update_memory(first)
        for later in replies[1:]:  # the approved text is the whole answer
            await runtime.store.set_memory_status(
                later.id,
                MemoryStatus.FAILED,
                error="left out: the reply approved with an edit replaces it",
                expect=[MemoryStatus.PENDING, MemoryStatus.FAILED],
            )
            later.status = MemoryStatus.FAILED
    waiting = (HELD, runtime.outbox.stale_reason)  # held; or failed by an older process
    for reply in replies:
        failed = reply.status is MemoryStatus.FAILED and reply.error in waiting
        if failed and await runtime.store.set_memory_status(
            reply.id, MemoryStatus.PENDING, expect=[MemoryStatus.FAILED]
        ):
            reply.status = MemoryStatus.PENDING


async def _moderated(
    runtime: Any,
    api: Conversations,
    event: InboundEvent,
    message: Message,
    verdict: Verdict,
    inbound_id: str,
) -> dict[str, Any]:
    """Hide, delete or flag a comment a rule matched; recorded in the audit log and kept (in
    the Store), unanswered."""
    services = getattr(runtime, "services", {})
    action, error = verdict.action, None
    if action != "flag":
        try:
            if action == "hide":
                await api.hide(event.id)
            else:
                await api.delete(event.id, media_id=event.media_id)
        except RetryLater:
            raise  # a cooldown: the job waits and acts then
        except (InstagramError, UnclearResponse) as exc:  # refused, or not on this backend
            error = f"could not {action} it: {exc}"
            action = "flag"
            log.warning("instagram: comment %s %s; flagged instead", event.id, error)
    await record(
        services,
        agent_id=runtime.agent_id,
        action=action,
        comment_id=event.id,
        rule=verdict.rule,
        error=error,
    )
    said = {"hide": "hidden", "delete": "deleted"}.get(action, "flagged")
    why = "flagged for review" if said == "flagged" else said
    memory = await runtime.observe(message, reason=f"{why}: {verdict.rule}")
    memory.content.metadata["moderation"] = {"action": action, "rule": verdict.rule}
    await runtime.store.update_memory(memory)
    return {said: verdict.rule, "message_id": inbound_id}


async def _settle_unknown(runtime: Any, replies: list[Memory], sender: ReplySender) -> None:
    """Replies whose fate was not known when they were failed: a recovery's "too old to send"
    (their process stopped while they were on their way), or a send with no clear answer.
    Sent after all when the platform shows them; an uncertain one it does not show is sent
    again."""
    stale = runtime.outbox.stale_reason
    for reply in replies:
        if reply.status is not MemoryStatus.FAILED:
            continue
        uncertain = UNCERTAIN in (reply.error or "")
        if reply.error != stale and not uncertain:
            continue
        if await sender.on_platform(sender.text_of(reply)):
            status = MemoryStatus.SENT
            sender.found += 1
        elif uncertain:
            status = MemoryStatus.PENDING
        else:
            continue
        if await runtime.store.set_memory_status(reply.id, status, expect=[MemoryStatus.FAILED]):
            reply.status = status
    inbound = replies[0].content.in_reply_to if replies else None
    if inbound and any(r.status is MemoryStatus.SENT for r in replies):
        await runtime.outbox.close(inbound)  # a delivered reply: the message is processed


async def _name_of(api: Conversations, event: InboundEvent) -> InboundEvent:
    """A DM's writer by their username (best effort: the webhook gives only their id)."""
    assert event.user_id is not None
    try:
        found = await api.profile(event.user_id)
    except (GraphAPIError, UnclearResponse) as exc:
        log.info("instagram: the profile of %s could not be read: %s", event.user_id, exc)
        return event
    return event.model_copy(update={"username": found.get("username") or None})


async def _read_mention(api: Conversations, event: InboundEvent) -> InboundEvent:
    """A mention's text and author, read from the API (the webhook carries only ids)."""
    comment = await api.mentioned_comment(event.id)
    sender = comment.get("from") or {}
    return event.model_copy(
        update={
            "text": str(comment.get("text") or ""),
            "username": comment.get("username") or sender.get("username"),
            "user_id": str(sender.get("id") or "") or comment.get("username"),
        }
    )
