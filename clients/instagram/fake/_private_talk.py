"""Comments and direct threads of :class:`~clients.instagram.fake.private.FakeInstagram`, in the
JSON instagrapi reads: ``GET media/{id}/comments/``, ``POST media/{id}/comment/`` (a reply with
``replied_to_comment_id``), ``GET direct_v2/inbox/``, ``GET direct_v2/threads/{id}/`` and
``POST direct_v2/threads/broadcast/text/``.

People act through :meth:`PrivateTalk.person_comments` and :meth:`PrivateTalk.person_messages`.
Replies to comments are listed with the media's comments (flattened, each with its
``replied_to_comment_id``), which is simpler than Instagram's child-comment previews and is what
a caller needs to find its own reply.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PrivateComment", "PrivateMessage", "PrivateTalk"]


@dataclass
class PrivateComment:
    pk: str
    media_id: str
    text: str
    user_id: str
    username: str
    at: float
    replied_to: str | None = None

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "pk": self.pk,
            "text": self.text,
            "user": {"pk": self.user_id, "username": self.username},
            "created_at_utc": int(self.at),
            "content_type": "comment",
            "status": "Active",
            "comment_like_count": 0,
        }
        if self.replied_to:
            body["replied_to_comment_id"] = self.replied_to
        return body


@dataclass
class PrivateMessage:
    item_id: str
    user_id: str
    text: str
    at: float

    def json(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "user_id": int(self.user_id),
            "timestamp": int(self.at * 1_000_000),
            "item_type": "text",
            "text": self.text,
        }


@dataclass
class PrivateTalk:
    """The account's comments and DM threads (``owner``: its user id and username)."""

    owner_id: str
    owner_username: str
    comments: list[PrivateComment] = field(default_factory=list)
    threads: dict[str, list[PrivateMessage]] = field(default_factory=dict)
    """Thread id → its messages, oldest first; one thread per person (``34028<user id>``)."""
    usernames: dict[str, str] = field(default_factory=dict)
    sends: int = 0
    """Replies and DMs the account sent."""

    def __post_init__(self) -> None:
        self._ids = itertools.count(18100000000000001)

    # -- people act ----------------------------------------------------------------------------
    def person_comments(
        self, media_id: str, text: str, *, user_id: str, username: str, at: float | None = None
    ) -> PrivateComment:
        self.usernames[user_id] = username
        comment = PrivateComment(
            str(next(self._ids)), media_id, text, user_id, username, at or time.time()
        )
        self.comments.append(comment)
        return comment

    def person_messages(
        self, text: str, *, user_id: str, username: str, at: float | None = None
    ) -> PrivateMessage:
        self.usernames[user_id] = username
        message = PrivateMessage(str(next(self._ids)), user_id, text, at or time.time())
        self.threads.setdefault(_thread_id(user_id), []).append(message)
        return message

    # -- what tests look at --------------------------------------------------------------------
    def replies_to(self, pk: str) -> list[PrivateComment]:
        return [c for c in self.comments if c.replied_to == pk and c.user_id == self.owner_id]

    def thread_with(self, user_id: str) -> list[PrivateMessage]:
        return list(self.threads.get(_thread_id(user_id), []))

    # -- the API -------------------------------------------------------------------------------
    def answer(
        self, method: str, path: str, form: dict[str, str]
    ) -> tuple[int, dict[str, Any]] | None:
        """The answer to a request this part serves, or ``None``."""
        parts = [p for p in path.split("/") if p]  # api, v1, ...
        rest = parts[2:]
        if len(rest) == 3 and rest[0] == "media" and rest[2] == "comments":
            listed = [c.json() for c in self.comments if c.media_id == rest[1]]
            return 200, {"comments": listed, "has_more_comments": False, "status": "ok"}
        if len(rest) == 3 and rest[0] == "media" and rest[2] == "comment" and method == "POST":
            return self._comment(rest[1], form)
        if rest[:2] == ["direct_v2", "inbox"]:
            threads = [self._thread(t) for t in self.threads]
            return 200, {"inbox": {"threads": threads, "oldest_cursor": None}, "status": "ok"}
        if len(rest) == 3 and rest[:2] == ["direct_v2", "threads"] and rest[2] in self.threads:
            return 200, {"thread": self._thread(rest[2]), "status": "ok"}
        if rest[:4] == ["direct_v2", "threads", "broadcast", "text"] and method == "POST":
            return self._send(form)
        return None

    def _comment(self, media_id: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        data = json.loads(form["signed_body"].split(".", 1)[1]) if "signed_body" in form else form
        text = str(data.get("comment_text") or "")
        if not text.strip():
            return 400, {"message": "comment_text is required", "status": "fail"}
        self.sends += 1
        comment = PrivateComment(
            str(next(self._ids)),
            media_id,
            text,
            self.owner_id,
            self.owner_username,
            time.time(),
            str(data["replied_to_comment_id"]) if data.get("replied_to_comment_id") else None,
        )
        self.comments.append(comment)
        return 200, {"comment": comment.json(), "status": "ok"}

    def _send(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if form.get("recipient_users"):
            thread_id = _thread_id(str(json.loads(form["recipient_users"])[0][0]))
        else:
            thread_id = str(json.loads(form.get("thread_ids", "[0]"))[0])
        text = form.get("text") or form.get("link_text") or ""
        self.sends += 1
        message = PrivateMessage(str(next(self._ids)), self.owner_id, text, time.time())
        self.threads.setdefault(thread_id, []).append(message)
        payload = {**message.json(), "thread_id": thread_id}
        return 200, {"action": "item_ack", "payload": payload, "status": "ok"}

    def _thread(self, thread_id: str) -> dict[str, Any]:
        user_id = thread_id[len(_PREFIX) :]
        items = [m.json() for m in reversed(self.threads[thread_id])]  # newest first
        last = self.threads[thread_id][-1].at if self.threads[thread_id] else time.time()
        return {
            "thread_id": thread_id,
            "thread_v2_id": f"v2{user_id}",
            "items": items,
            "users": [{"pk": user_id, "username": self.usernames.get(user_id, "")}],
            "admin_user_ids": [],
            "last_activity_at": int(last * 1_000_000),
            "muted": False,
            "named": False,
            "canonical": True,
            "pending": False,
            "archived": False,
            "thread_type": "private",
            "thread_title": self.usernames.get(user_id, ""),
            "folder": 0,
            "vc_muted": False,
            "is_group": False,
            "mentions_muted": False,
            "approval_required_for_new_members": False,
            "input_mode": 0,
        }


_PREFIX = "34028"


def _thread_id(user_id: str) -> str:
    """One thread per person, its id numeric as Instagram's are."""
    return f"{_PREFIX}{user_id}"
