"""Comments, mentions and direct threads of :class:`~clients.instagram.fake.private.FakeInstagram`,
in the JSON instagrapi reads:

- ``GET media/{id}/comments/``: the top-level comments, each with ``child_comment_count`` and
  its newest replies in ``preview_child_comments`` (as Instagram lists them);
- ``GET media/{id}/comments/{comment}/inline_child_comments/``: a comment's replies;
- ``POST media/{id}/comment/`` (a reply with ``replied_to_comment_id``);
- ``POST media/{id}/comment/bulk_delete/`` (``comment_ids_to_delete``): the account deletes
  comments on its own media;
- ``GET news/inbox/``: the activity feed, where a comment elsewhere that @mentions the account
  is a story of type 66 (``args``: ``comment_id``, ``media``, ``profile_id``, ``text``);
- ``GET direct_v2/inbox/``, ``GET direct_v2/threads/{id}/``,
  ``POST direct_v2/threads/broadcast/text/``.

People act through :meth:`PrivateTalk.person_comments`, :meth:`PrivateTalk.person_mentions`
and :meth:`PrivateTalk.person_messages`. A reply or DM may be scripted to take effect and then
answer late (:attr:`PrivateTalk.answer_delay_s`), the window in which a caller that dies knows
nothing of what it sent.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MENTION_STORY", "PrivateComment", "PrivateMessage", "PrivateTalk"]

MENTION_STORY = 66
"""The activity feed's ``story_type`` of "mentioned you in a comment"."""
PREVIEW = 2
"""Replies Instagram shows with a comment in a media's comment list."""


@dataclass
class PrivateComment:
    pk: str
    media_id: str
    text: str
    user_id: str
    username: str
    at: float
    replied_to: str | None = None
    mention: bool = False
    """A comment on another account's media that @mentions this one."""

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "pk": self.pk,
            "text": self.text,
            "user": {"pk": self.user_id, "username": self.username},
            "user_id": int(self.user_id),
            "created_at_utc": int(self.at),
            "content_type": "comment",
            "status": "Active",
            "comment_like_count": 0,
            "media_id": self.media_id,
        }
        if self.replied_to:
            body["parent_comment_id"] = self.replied_to
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
    deleted: list[PrivateComment] = field(default_factory=list)
    """Comments the account deleted."""
    sends: int = 0
    """Replies and DMs the account sent."""
    answer_delay_s: float = 0.0
    """Seconds a reply or DM waits after it took effect before it answers (set it to 0 to
    let a held answer go at once)."""
    answering: int = 0
    """Replies and DMs that took effect and have not answered yet."""

    def __post_init__(self) -> None:
        self._ids = itertools.count(18100000000000001)

    # -- people act ----------------------------------------------------------------------------
    def person_comments(
        self,
        media_id: str,
        text: str,
        *,
        user_id: str,
        username: str,
        replied_to: str | None = None,
        at: float | None = None,
    ) -> PrivateComment:
        """A person comments on a media (or replies to a comment: ``replied_to``)."""
        self.usernames[user_id] = username
        comment = PrivateComment(
            str(next(self._ids)), media_id, text, user_id, username, at or time.time(), replied_to
        )
        self.comments.append(comment)
        return comment

    def person_mentions(
        self, text: str, *, user_id: str, username: str, at: float | None = None
    ) -> PrivateComment:
        """A person @mentions the account in a comment on their own media (a story in the
        account's activity feed)."""
        media_id = f"{next(self._ids)}_{user_id}"
        comment = self.person_comments(media_id, text, user_id=user_id, username=username, at=at)
        comment.mention = True
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
        if rest[:1] == ["media"] and len(rest) >= 3:
            return self._media(method, rest[1], rest[2:], form)
        if rest[:2] == ["news", "inbox"]:
            return 200, {"new_stories": [], "old_stories": self._stories(), "status": "ok"}
        if rest[:2] == ["direct_v2", "inbox"]:
            threads = [self._thread(t) for t in self.threads]
            return 200, {"inbox": {"threads": threads, "oldest_cursor": None}, "status": "ok"}
        if len(rest) == 3 and rest[:2] == ["direct_v2", "threads"] and rest[2] in self.threads:
            return 200, {"thread": self._thread(rest[2]), "status": "ok"}
        if rest[:4] == ["direct_v2", "threads", "broadcast", "text"] and method == "POST":
            return self._send(form)
        return None

    def _media(
        self, method: str, media_id: str, rest: list[str], form: dict[str, str]
    ) -> tuple[int, dict[str, Any]] | None:
        if rest == ["comments"]:
            top = [self._listed(c) for c in self.comments if c.media_id == media_id]
            top = [c for c in top if c is not None]
            return 200, {"comments": top, "has_more_comments": False, "status": "ok"}
        if len(rest) == 3 and rest[0] == "comments" and rest[2] == "inline_child_comments":
            children = [c.json() for c in self.comments if c.replied_to == rest[1]]
            return 200, {
                "child_comments": children,
                "has_more_head_child_comments": False,
                "status": "ok",
            }
        if rest == ["comment"] and method == "POST":
            return self._comment(media_id, form)
        if rest == ["comment", "bulk_delete"] and method == "POST":
            return self._delete(media_id, form)
        return None

    def _listed(self, comment: PrivateComment) -> dict[str, Any] | None:
        """A top-level comment as a media's comment list shows it; ``None`` for a reply."""
        if comment.replied_to:
            return None
        body = comment.json()
        children = [c for c in self.comments if c.replied_to == comment.pk]
        body["child_comment_count"] = len(children)
        body["preview_child_comments"] = [c.json() for c in children[-PREVIEW:]]
        return body

    def _comment(self, media_id: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        data = _signed(form)
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

    def _delete(self, media_id: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if not media_id.endswith(f"_{self.owner_id}"):
            return 400, {"message": "you cannot delete comments on this media", "status": "fail"}
        wanted = set(str(_signed(form).get("comment_ids_to_delete") or "").split(","))
        gone = [c for c in self.comments if c.pk in wanted and c.media_id == media_id]
        gone += [c for c in self.comments if c.replied_to in {g.pk for g in gone}]
        self.comments = [c for c in self.comments if c not in gone]
        self.deleted.extend(gone)
        return 200, {"status": "ok"}

    def _stories(self) -> list[dict[str, Any]]:
        """The activity feed: a story per comment that mentions the account, newest first."""
        stories = []
        for c in sorted((c for c in self.comments if c.mention), key=lambda c: -c.at):
            stories.append(
                {
                    "story_type": MENTION_STORY,
                    "type": 1,
                    "pk": f"mention-{c.pk}",
                    "counts": {},
                    "args": {
                        "text": f"{c.username} mentioned you in a comment: {c.text}",
                        "profile_id": int(c.user_id),
                        "profile_name": c.username,
                        "media": [{"id": c.media_id, "image": "https://instagram.example/m.jpg"}],
                        "comment_id": c.pk,
                        "comment_ids": [c.pk],
                        "timestamp": c.at,
                        "links": [
                            {"start": 0, "end": len(c.username), "type": "user", "id": c.user_id}
                        ],
                    },
                }
            )
        return stories

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


def _signed(form: dict[str, str]) -> dict[str, Any]:
    """The fields of a signed body (``signed_body=SIGNATURE.{json}``), or the form itself."""
    if "signed_body" in form:
        parsed = json.loads(form["signed_body"].split(".", 1)[1])
        return parsed if isinstance(parsed, dict) else {}
    return dict(form)


def _thread_id(user_id: str) -> str:
    """One thread per person, its id numeric as Instagram's are."""
    return f"{_PREFIX}{user_id}"
