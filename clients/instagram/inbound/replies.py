"""Sending a reply on Instagram once: a comment reply, a reply to a mention, a private reply or
a DM, with the check a restart makes before it sends again.

The outbox (:mod:`carrier.outbox`) saves the intent before the call: a reply is claimed
(``pending`` → ``sending``) in the Store, then :class:`ReplySender` is called. A process killed
between the two leaves the reply claimed; whoever sends it again (the job taken over by another
worker) first reads the platform (:meth:`ReplySender.on_platform`): the comment's replies, the
mention's replies or the DM thread, looking for the account's own reply with the same text
(compared by :func:`~clients.instagram.graph.recovery.caption_fingerprint`, so whitespace
Instagram changes does not matter) written after the message it answers. Found: it went out,
nothing is sent. This is the discipline publishing follows (``graph/recovery.py``).

A DM is sent only inside Instagram's messaging window, 24 h after the person's message:
outside it nothing is sent and the reply is failed with :class:`OutsideWindow`'s reason (also
when Meta itself refuses with code 10 / 2534022).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from carrier.types import Memory, utcnow
from clients.instagram.errors import GraphAPIError, InstagramError
from clients.instagram.graph.api import UnclearResponse, parse_timestamp
from clients.instagram.graph.conversations import Conversations, outside_window
from clients.instagram.graph.recovery import caption_fingerprint
from clients.instagram.inbound.events import EventKind, InboundEvent

__all__ = ["MESSAGING_WINDOW", "UNCERTAIN", "OutsideWindow", "ReplySender", "SendUncertain"]

MESSAGING_WINDOW = timedelta(hours=24)
COMMENT_LIMIT = 2200
MESSAGE_LIMIT = 1000


UNCERTAIN = "uncertain:"
"""How the reason of a reply whose send had no clear answer begins (a timeout, a 5xx): the run
that retries it reads the platform first, and sends it only if it is not there."""


class OutsideWindow(InstagramError):
    """A DM that Instagram's messaging window no longer allows; nothing was sent."""


class SendUncertain(InstagramError):
    """The send had no clear answer: the reply may or may not be out."""


class ReplySender:
    """The outbox's ``send`` for the replies to one event."""

    def __init__(
        self,
        api: Conversations,
        event: InboundEvent,
        *,
        private: bool = False,
        check_first: bool = False,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.api = api
        self.event = event
        self.private = private and event.kind is EventKind.COMMENT
        """Answer the comment with a private reply (a DM) instead of a public one."""
        self.check_first = check_first
        """Read the platform before each send (a run after a crash or a failed attempt)."""
        self.clock = clock
        self.sent: list[str] = []
        """Platform ids of what this sender sent."""
        self.found: int = 0
        """Replies found already on the platform (not sent again)."""

    def text_of(self, reply: Memory) -> str:
        """What is posted: in a comment's thread (a reply to a reply), the reply goes under the
        thread's first comment, so it names the person it answers; cut to what Instagram takes
        (a comment 2,200 characters, a message 1,000)."""
        text = reply.content.text
        event = self.event
        if event.kind is EventKind.COMMENT and event.parent_id and not self.private:
            handle = f"@{event.username}" if event.username else ""
            if handle and not text.lower().startswith(handle.lower()):
                text = f"{handle} {text}"
        dm = event.kind is EventKind.MESSAGE or self.private
        return _cut(text, MESSAGE_LIMIT if dm else COMMENT_LIMIT)

    async def __call__(self, reply: Memory) -> None:
        text = self.text_of(reply)
        if self.check_first and await self.on_platform(text):
            self.found += 1
            return
        event = self.event
        try:
            if event.kind is EventKind.MESSAGE:
                self._inside_window()
                assert event.user_id is not None
                self.sent.append(await self.api.send_message(event.user_id, text))
            elif event.kind is EventKind.MENTION:
                self.sent.append(
                    await self.api.reply_to_mention(event.id, event.media_id or "", text)
                )
            elif self.private:
                self.sent.append(
                    await self.api.private_reply(event.id, text, user_id=event.user_id)
                )
            else:
                target = event.parent_id or event.id
                self.sent.append(await self.api.reply(target, text, media_id=event.media_id))
        except UnclearResponse as exc:
            raise SendUncertain(f"{UNCERTAIN} {exc}") from exc
        except GraphAPIError as exc:
            if outside_window(exc):
                raise OutsideWindow(
                    "Instagram refused the message: outside the 24 h messaging window "
                    f"(code 10/2534022: {exc})"
                ) from exc
            raise

    def _inside_window(self) -> None:
        written = self.event.at
        if written is None:
            return  # Meta decides (it refuses outside the window)
        closes = written + MESSAGING_WINDOW
        if self.clock() >= closes:
            raise OutsideWindow(
                f"not sent: outside Instagram's 24 h messaging window (the message was written "
                f"at {written.isoformat(timespec='seconds')}; the window closed at "
                f"{closes.isoformat(timespec='seconds')})"
            )

    async def on_platform(self, text: str) -> bool:
        """Whether the account's reply with this text is already on the platform."""
        mine = caption_fingerprint(text)
        event = self.event
        if event.kind is EventKind.MESSAGE or self.private:
            assert event.user_id is not None or self.private
            user = event.user_id or ""
            items = await self.api.thread(user) if user else []
            return any(
                _from(m) == self.api.ig_user_id
                and caption_fingerprint(str(m.get("message") or "")) == mine
                and _after(m.get("created_time"), event.at)
                for m in items
            )
        if event.kind is EventKind.MENTION:
            mentioned = await self.api.mentioned_comment(event.id, media_id=event.media_id)
            replies = mentioned.get("replies") or {}
            items = list(replies.get("data") or [])
        else:
            items = await self.api.replies(event.parent_id or event.id, media_id=event.media_id)
        return any(
            _from(c) == self.api.ig_user_id and caption_fingerprint(str(c.get("text"))) == mine
            for c in items
        )


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a word with an ellipsis when too long."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + "…"


def _from(item: dict[str, Any]) -> str:
    return str((item.get("from") or {}).get("id") or "")


def _after(stamp: Any, since: datetime | None) -> bool:
    if since is None:
        return True
    when = parse_timestamp(str(stamp or ""))
    return when is None or when >= since.replace(microsecond=0)
