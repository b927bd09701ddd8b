"""The conversational side of :class:`~clients.instagram.fake.graph.FakeGraphAPI`: comments on
the account's media, replies, private replies, @mentions, ``hide``, and direct messages with
Instagram's messaging window.

People act through the ``person_*`` methods (a comment, a mention, a DM, each with an optional
time in the past); the account acts through the HTTP endpoints the Graph API documents:

- ``GET /{media-id}/comments`` (the top-level comments, newest first; with ``replies{...}`` in
  ``fields``, each with its replies, oldest first), ``GET /{comment-id}``,
  ``GET /{comment-id}/replies``
- ``POST /{comment-id}/replies`` (``message``): a public reply
- ``POST /{comment-id}`` (``hide=true|false``): hide or show a comment
- ``DELETE /{comment-id}``: delete a comment on the account's media (and its replies)
- ``GET /{ig-user-id}?fields=mentioned_comment.comment_id(ID){...}`` and
  ``POST /{ig-user-id}/mentions`` (``comment_id``, ``media_id``, ``message``): a reply to a
  comment that @mentions the account on someone else's media
- ``GET /{ig-user-id}/conversations?user_id=IGSID``, ``GET /{conversation-id}?fields=messages``
- ``POST /{ig-user-id}/messages`` (``recipient``, ``message``, JSON): a DM to ``{"id": IGSID}``
  within 24 h of that person's last message, or a private reply to ``{"comment_id": ID}`` (once
  per comment, within 7 days of it). Outside the window the answer is Meta's: HTTP 400, code 10,
  subcode 2534022, "This message is sent outside of allowed window."

Like publishing, a reply may be scripted to take effect and then answer late
(:attr:`Conversations.answer_delay_s`), the window in which a caller that dies knows nothing of
what it sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from clients.instagram.fake._graph_http import graph_error

__all__ = ["WINDOW", "Conversations", "FakeComment", "FakeMessage", "timestamp"]

WINDOW = timedelta(hours=24)
"""How long after a person's last message the account may write to them."""
PRIVATE_REPLY_WINDOW = timedelta(days=7)

_MENTIONED = re.compile(r"mentioned_comment\.comment_id\(([^)]*)\)")


def timestamp(moment: datetime) -> str:
    """A time as the Graph API writes it: ``2025-06-01T12:00:00+0000``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


@dataclass
class FakeComment:
    id: str
    media_id: str
    text: str
    user_id: str
    username: str
    at: datetime
    parent_id: str | None = None
    hidden: bool = False
    mention: bool = False
    """A comment on another account's media that @mentions this one."""
    replies: list[str] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "timestamp": timestamp(self.at),
            "username": self.username,
            "from": {"id": self.user_id, "username": self.username},
            "media": {"id": self.media_id},
            "hidden": self.hidden,
            "like_count": 0,
        }
        if self.parent_id:
            body["parent_id"] = self.parent_id
        return body


@dataclass
class FakeMessage:
    id: str
    """The message id (``mid``)."""
    sender: str
    recipient: str
    text: str
    at: datetime

    def fields(self, usernames: dict[str, str]) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_time": timestamp(self.at),
            "from": {"id": self.sender, "username": usernames.get(self.sender, "")},
            "to": {"data": [{"id": self.recipient, "username": usernames.get(self.recipient, "")}]},
            "message": self.text,
        }


Reply = tuple[int, Any]


class Conversations:
    """Comments and messages of one fake account (``owner``: its id and username)."""

    def __init__(
        self, *, owner_id: str, owner_username: str, new_id: Callable[[], str], lock: Any
    ) -> None:
        self.owner_id = owner_id
        self.owner_username = owner_username
        self._new_id = new_id
        self._lock: threading.Lock = lock
        self.comments: dict[str, FakeComment] = {}
        self.messages: list[FakeMessage] = []
        self.usernames: dict[str, str] = {owner_id: owner_username}
        self.deleted: list[FakeComment] = []
        """Comments the account deleted."""
        self.private_replies: dict[str, str] = {}
        """comment id → the message id of its private reply."""
        self.reply_calls = 0
        """Replies and DMs the account attempted (POSTs), refused ones included."""
        self.answer_delay_s = 0.0
        """Seconds a reply or DM waits after it took effect before it answers."""
        self.answering = 0
        """Replies and DMs that took effect and have not answered yet."""
        self.refusals: list[dict[str, Any]] = []
        """Errors the account's sends got (the window, a second private reply)."""
        self.send_faults: list[str] = []
        """Scripted outcomes of the next sends, one each: ``500_after_send`` (the reply or DM
        takes effect, the answer is a 500) or ``500_before_send`` (a 500, nothing happens)."""

    # -- people act ----------------------------------------------------------------------------
    def person_comments(
        self,
        media_id: str,
        text: str,
        *,
        user_id: str,
        username: str,
        parent_id: str | None = None,
        at: datetime | None = None,
    ) -> FakeComment:
        """A person comments on the account's media (or replies to a comment: ``parent_id``)."""
        with self._lock:
            comment = self._comment(media_id, text, user_id, username, parent_id, at)
            return comment

    def person_mentions(
        self, text: str, *, user_id: str, username: str, media_id: str | None = None
    ) -> FakeComment:
        """A person @mentions the account in a comment on someone else's media."""
        with self._lock:
            comment = self._comment(media_id or self._new_id(), text, user_id, username, None, None)
            comment.mention = True
            return comment

    def person_messages(
        self, text: str, *, user_id: str, username: str, at: datetime | None = None
    ) -> FakeMessage:
        """A person sends the account a direct message (``at``: when, default now)."""
        with self._lock:
            self.usernames[user_id] = username
            message = FakeMessage(
                f"aWdfZAG1faXRlbTo{self._new_id()}",
                user_id,
                self.owner_id,
                text,
                at or datetime.now(UTC),
            )
            self.messages.append(message)
            return message

    def _comment(
        self,
        media_id: str,
        text: str,
        user_id: str,
        username: str,
        parent_id: str | None,
        at: datetime | None,
    ) -> FakeComment:
        self.usernames[user_id] = username
        comment = FakeComment(
            self._new_id(), media_id, text, user_id, username, at or datetime.now(UTC), parent_id
        )
        self.comments[comment.id] = comment
        if parent_id and parent_id in self.comments:
            self.comments[parent_id].replies.append(comment.id)
        return comment

    # -- what tests look at ------------------------------------------------------------------
    def replies_to(self, comment_id: str) -> list[FakeComment]:
        """The account's own replies under a comment (public ones)."""
        with self._lock:
            parent = self.comments[comment_id]
            found = [self.comments[i] for i in parent.replies]
            return [c for c in found if c.user_id == self.owner_id]

    def thread_with(self, user_id: str) -> list[FakeMessage]:
        """Every DM between the account and a person, oldest first."""
        with self._lock:
            return [m for m in self.messages if user_id in (m.sender, m.recipient)]

    # -- the API -----------------------------------------------------------------------------
    def handle(
        self, method: str, target: str, edge: str | None, params: dict[str, str]
    ) -> Reply | None:
        """The answer to a request this part serves, or ``None`` when it is not one."""
        if target == self.owner_id:
            if method == "GET" and edge is None and "mentioned_comment" in params.get("fields", ""):
                return self._mentioned(params)
            if method == "POST" and edge == "mentions":
                return self._reply_to_mention(params)
            if method == "POST" and edge == "messages":
                return self._send(params)
            if method == "GET" and edge == "conversations":
                return self._conversations(params)
            return None
        if target.startswith("conv-") and method == "GET" and edge is None:
            return self._thread(target[len("conv-") :])
        if method == "GET" and edge is None and target in self.usernames:  # a person's profile
            name = self.usernames[target]
            return 200, {"id": target, "username": name, "name": name.title()}
        comment = self.comments.get(target)
        if comment is not None:
            if method == "GET" and edge is None:
                return 200, comment.fields()
            if method == "GET" and edge == "replies":
                return 200, {"data": [self.comments[i].fields() for i in comment.replies]}
            if method == "POST" and edge == "replies":
                return self._reply(comment, params.get("message", ""))
            if method == "POST" and edge is None and "hide" in params:
                comment.hidden = params["hide"].lower() == "true"
                return 200, {"success": True}
            if method == "DELETE" and edge is None:
                return self._delete(comment)
            return None
        if method == "GET" and edge == "comments":
            top = [c for c in self.comments.values() if c.media_id == target and not c.parent_id]
            if top or any(c.media_id == target for c in self.comments.values()):
                expand = "replies{" in params.get("fields", "")
                return 200, {"data": [self._listed(c, expand) for c in reversed(top)]}
        return None

    def _listed(self, comment: FakeComment, expand: bool) -> dict[str, Any]:
        body = comment.fields()
        if expand and comment.replies:
            body["replies"] = {"data": [self.comments[i].fields() for i in comment.replies]}
        return body

    def _delete(self, comment: FakeComment) -> Reply:
        if comment.mention:
            return graph_error(400, "(#10) You cannot delete a comment on this media", 10)
        gone = [comment, *(self.comments[i] for i in comment.replies)]
        for item in gone:
            del self.comments[item.id]
        parent = self.comments.get(comment.parent_id or "")
        if parent is not None:
            parent.replies.remove(comment.id)
        self.deleted.extend(gone)
        return 200, {"success": True}

    def _reply(self, comment: FakeComment, text: str) -> Reply:
        self.reply_calls += 1
        if not text.strip():
            return graph_error(400, "(#100) The parameter message is required", 100)
        if comment.mention:
            return graph_error(400, "(#10) Use the mentions edge to reply to a mention", 10)
        reply = self._comment(
            comment.media_id, text, self.owner_id, self.owner_username, comment.id, None
        )
        return 200, {"id": reply.id}

    def _mentioned(self, params: dict[str, str]) -> Reply:
        found = _MENTIONED.search(params.get("fields", ""))
        comment = self.comments.get(found.group(1)) if found else None
        if comment is None or not comment.mention:
            return graph_error(400, "(#100) The comment does not mention this account", 100)
        body = comment.fields()
        body["replies"] = {"data": [self.comments[i].fields() for i in comment.replies]}
        return 200, {"id": self.owner_id, "mentioned_comment": body}

    def _reply_to_mention(self, params: dict[str, str]) -> Reply:
        self.reply_calls += 1
        comment = self.comments.get(params.get("comment_id", ""))
        if comment is None or not comment.mention:
            return graph_error(400, "(#100) The comment does not mention this account", 100)
        text = params.get("message", "")
        if not text.strip():
            return graph_error(400, "(#100) The parameter message is required", 100)
        reply = self._comment(
            comment.media_id, text, self.owner_id, self.owner_username, comment.id, None
        )
        return 200, {"id": reply.id}

    def _conversations(self, params: dict[str, str]) -> Reply:
        user_id = params.get("user_id")
        people = {m.sender if m.sender != self.owner_id else m.recipient for m in self.messages}
        if user_id:
            people &= {user_id}
        return 200, {"data": [{"id": f"conv-{p}"} for p in sorted(people)]}

    def _thread(self, user_id: str) -> Reply:
        messages = [m for m in self.messages if user_id in (m.sender, m.recipient)]
        if not messages:
            return graph_error(400, f"Unsupported get request: conv-{user_id}", 100)
        newest = sorted(messages, key=lambda m: m.at, reverse=True)
        data = [m.fields(self.usernames) for m in newest]
        return 200, {"id": f"conv-{user_id}", "messages": {"data": data}}

    def _send(self, params: dict[str, str]) -> Reply:
        self.reply_calls += 1
        try:
            recipient = _json(params.get("recipient"))
            text = str(_json(params.get("message")).get("text") or "")
        except ValueError:
            return graph_error(400, "(#100) recipient and message must be JSON objects", 100)
        if not text.strip():
            return graph_error(400, "(#100) The parameter message is required", 100)
        now = datetime.now(UTC)
        if "comment_id" in recipient:
            comment = self.comments.get(str(recipient["comment_id"]))
            if comment is None:
                return graph_error(400, "(#100) No matching comment", 100)
            if comment.id in self.private_replies or now - comment.at > PRIVATE_REPLY_WINDOW:
                return self._refuse(recipient, "a private reply was sent already, or too late")
            message = self._message(comment.user_id, text, now)
            self.private_replies[comment.id] = message.id
            return 200, {"recipient_id": comment.user_id, "message_id": message.id}
        user_id = str(recipient.get("id") or "")
        heard = [m.at for m in self.messages if m.sender == user_id]
        if not heard or now - max(heard) > WINDOW:
            return self._refuse(recipient, "outside the window")
        message = self._message(user_id, text, now)
        return 200, {"recipient_id": user_id, "message_id": message.id}

    def _refuse(self, recipient: dict[str, Any], why: str) -> Reply:
        self.refusals.append({"recipient": recipient, "why": why})
        return graph_error(
            400,
            "This message is sent outside of allowed window.",
            10,
            "IGApiException",
            subcode=2534022,
        )

    def _message(self, user_id: str, text: str, now: datetime) -> FakeMessage:
        message = FakeMessage(
            f"aWdfZAG1faXRlbTo{self._new_id()}", self.owner_id, user_id, text, now
        )
        self.messages.append(message)
        return message

    # -- the late answer ---------------------------------------------------------------------
    def sends(self, method: str, target: str, edge: str | None) -> bool:
        """Whether a request is one of the account's sends (a reply or a DM)."""
        if method != "POST":
            return False
        if target == self.owner_id:
            return edge in ("messages", "mentions")
        return edge == "replies"

    def faulty(self, answer: Callable[[], Reply]) -> Reply:
        """Run a send as the next scripted fault says (under the fake's lock)."""
        fault = self.send_faults.pop(0)
        if fault == "500_before_send":
            return graph_error(500, "An unexpected error has occurred.", 2, transient=True)
        answer()
        return graph_error(500, "An unexpected error has occurred.", 2, transient=True)

    def answer_late(self, answer: Callable[[], Reply]) -> Reply:
        """Run a send (under the fake's lock), then hold its answer ``answer_delay_s``."""
        with self._lock:
            status, body = answer()
            done = status == 200
            self.answering += done
        try:
            time.sleep(self.answer_delay_s)
        finally:
            with self._lock:
                self.answering -= done
        return status, body


def _json(value: str | None) -> dict[str, Any]:
    parsed = json.loads(value or "{}")
    if not isinstance(parsed, dict):
        raise ValueError("not an object")
    return parsed
