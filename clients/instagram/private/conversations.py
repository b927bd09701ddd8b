"""Comments, mentions and DMs through instagrapi, in the shapes the Graph side uses.

:class:`PrivateConversationAPI` answers the calls the inbound side makes
(:class:`~clients.instagram.graph.conversations.Conversations`: the account's recent media, a
media's comments and their replies, a comment's replies, a reply; mentions; the conversations,
their messages, a DM) through the publisher's logged-in instagrapi client: its saved, encrypted
session reused, ``delay_range`` pauses between requests like a person, and a challenge or a
password problem raised as :class:`~clients.instagram.errors.OperatorActionRequired` (as
publishing does), throttling as a cooldown. Items come back as the Graph API writes them
(``from.id``, ``text``/``message``, ``timestamp``/``created_time``), so the poller and the reply
check work unchanged.

What Instagram's private API offers, and so this backend:

- comments and their replies: a media's comment list (``media/{id}/comments/``) shows each
  comment with its reply count and newest replies; a comment with more replies than that is
  read whole (``inline_child_comments``, instagrapi's ``media_comment_replies``);
- mentions: the activity feed (``news/inbox/``, instagrapi's ``news_inbox_v1``) lists comments
  elsewhere that @mention the account (story type 66), with the comment's id, its media, its
  writer and its text as the feed gives it; the reply goes under that comment;
- no hiding: the private API has no hide for comments. Deleting (``comment_bulk_delete``) is
  there, for moderation that the operator set to ``delete``;
- no private replies (a DM tied to a comment): a comment answered privately gets a plain DM to
  its writer (``direct_send``), which may land in their message requests.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from clients.instagram.errors import InstagramError
from clients.instagram.private.publisher import InstagrapiPublisher

__all__ = ["MENTION_STORY", "PrivateConversationAPI", "timestamp"]

MENTION_STORY = 66
"""The activity feed's ``story_type`` of "<someone> mentioned you in a comment"."""
_MENTIONED = re.compile(r"^\S+ mentioned you in a comment:\s*", re.S)
_PAGES = 3
"""Pages of a media's comment list read per poll (its newest comments)."""


def timestamp(moment: datetime) -> str:
    """A time as the Graph API writes it (``2025-06-01T12:00:00+0000``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _utc(moment: datetime) -> datetime:
    """instagrapi gives direct messages' times as naive local times, comments' as UTC."""
    return moment.astimezone(UTC) if moment.tzinfo is None else moment


def _comment(comment: Any, media_id: str, parent_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(comment.pk),
        "text": comment.text,
        "from": {"id": str(comment.user.pk), "username": comment.user.username},
        "username": comment.user.username,
        "timestamp": timestamp(_utc(comment.created_at_utc)),
        "media": {"id": media_id},
    }
    parent = parent_id or comment.replied_to_comment_id
    if parent:
        body["parent_id"] = str(parent)
    return body


def _listing(client: Any, media_id: str) -> list[dict[str, Any]]:
    """A media's top-level comments as Instagram lists them (raw: with ``child_comment_count``
    and ``preview_child_comments``, which instagrapi's parsed comments leave out)."""
    params: dict[str, str] = {"can_support_threading": "true", "permalink_enabled": "false"}
    found: list[dict[str, Any]] = []
    for _ in range(_PAGES):
        result = client.private_request(f"media/{media_id}/comments/", params=params)
        found.extend(c for c in result.get("comments") or [] if isinstance(c, dict))
        if result.get("has_more_comments") and result.get("next_max_id"):
            params = {**params, "max_id": str(result["next_max_id"])}
        elif result.get("has_more_headload_comments") and result.get("next_min_id"):
            params = {**params, "min_id": str(result["next_min_id"])}
        else:
            break
    return found


def _with_replies(client: Any, media_id: str) -> list[dict[str, Any]]:
    """Comments and their replies (flat, each reply with its ``parent_id``), in one call per
    page, plus one per comment with more replies than the list previews."""
    from instagrapi.extractors import extract_comment

    out: list[dict[str, Any]] = []
    for raw in _listing(client, media_id):
        top = extract_comment(dict(raw))
        out.append(_comment(top, media_id))
        preview = [r for r in raw.get("preview_child_comments") or [] if isinstance(r, dict)]
        if int(raw.get("child_comment_count") or 0) > len(preview):
            children = client.media_comment_replies(media_id, str(top.pk))
        else:
            children = [extract_comment(dict(r)) for r in preview]
        out.extend(_comment(child, media_id, str(top.pk)) for child in children)
    return out


class PrivateConversationAPI:
    """Conversation calls for the account an :class:`InstagrapiPublisher` logs in as."""

    def __init__(self, publisher: InstagrapiPublisher, *, account_id: str) -> None:
        self.publisher = publisher
        self.ig_user_id = account_id

    @classmethod
    async def connect(cls, publisher: InstagrapiPublisher) -> PrivateConversationAPI:
        """Logged in (the stored session when it still works), knowing the account's id."""
        account = await publisher.call(lambda client: str(client.user_id))
        return cls(publisher, account_id=account)

    # -- comments ------------------------------------------------------------------------------
    async def recent_media(self, limit: int = 10) -> list[dict[str, Any]]:
        medias = await self.publisher.call(
            lambda client: client.user_medias_v1(client.user_id, amount=limit)
        )
        return [{"id": str(m.id)} for m in medias]

    async def media_comments(self, media_id: str) -> list[dict[str, Any]]:
        """A media's comments and their replies (each reply with ``parent_id``)."""
        return await self.publisher.call(lambda client: _with_replies(client, media_id))

    async def replies(
        self, comment_id: str, *, media_id: str | None = None
    ) -> list[dict[str, Any]]:
        if media_id is None:
            raise InstagramError("reading a comment's replies through instagrapi needs its media")
        found = await self.publisher.call(
            lambda client: client.media_comment_replies(media_id, comment_id)
        )
        return [_comment(c, media_id, comment_id) for c in found]

    async def reply(self, comment_id: str, text: str, *, media_id: str | None = None) -> str:
        if media_id is None:
            raise InstagramError("replying to a comment through instagrapi needs its media")
        made = await self.publisher.call(
            lambda client: client.media_comment(
                media_id, text, replied_to_comment_id=int(comment_id)
            )
        )
        return str(made.pk)

    async def hide(self, comment_id: str, hidden: bool = True) -> None:
        raise InstagramError(
            "Instagram's private API cannot hide comments (only the Graph API can: "
            "publisher: graph); set moderation.action: delete to remove them instead"
        )

    async def delete(self, comment_id: str, *, media_id: str | None = None) -> None:
        """Delete a comment on the account's own media (``comment_bulk_delete``)."""
        if media_id is None:
            raise InstagramError("deleting a comment through instagrapi needs its media")
        done = await self.publisher.call(
            lambda client: client.comment_bulk_delete(media_id, [int(comment_id)])
        )
        if not done:
            raise InstagramError(f"Instagram did not delete comment {comment_id}")

    async def private_reply(self, comment_id: str, text: str, *, user_id: str | None = None) -> str:
        """No private replies here: a DM to the comment's writer instead."""
        if not user_id:
            raise InstagramError("a DM for a comment through instagrapi needs its writer's id")
        return await self.send_message(user_id, text)

    # -- mentions ------------------------------------------------------------------------------
    async def mentions(self) -> list[dict[str, Any]]:
        """Comments elsewhere that @mention the account, from its activity feed, newest first
        (their text as the feed gives it)."""
        inbox = await self.publisher.call(lambda client: client.news_inbox_v1(mark_as_seen=False))
        found = []
        for story in [*(inbox.get("new_stories") or []), *(inbox.get("old_stories") or [])]:
            if not isinstance(story, dict) or story.get("story_type") != MENTION_STORY:
                continue
            args = story.get("args") or {}
            media = [m for m in args.get("media") or [] if isinstance(m, dict)]
            if not args.get("comment_id") or not media:
                continue
            name = str(args.get("profile_name") or "")
            found.append(
                {
                    "id": str(args["comment_id"]),
                    "text": _MENTIONED.sub("", str(args.get("text") or ""), count=1),
                    "from": {"id": str(args.get("profile_id") or ""), "username": name},
                    "username": name,
                    "timestamp": timestamp(datetime.fromtimestamp(float(args["timestamp"]), UTC))
                    if args.get("timestamp")
                    else "",
                    "media": {"id": str(media[0]["id"])},
                }
            )
        return found

    async def mentioned_comment(
        self, comment_id: str, *, media_id: str | None = None
    ) -> dict[str, Any]:
        """The replies under a comment that mentions the account (its text comes with the
        mention itself: :meth:`mentions`)."""
        return {
            "id": comment_id,
            "replies": {"data": await self.replies(comment_id, media_id=media_id)},
        }

    async def reply_to_mention(self, comment_id: str, media_id: str, text: str) -> str:
        """A reply under the mentioning comment, on its writer's media."""
        return await self.reply(comment_id, text, media_id=media_id)

    # -- direct messages -----------------------------------------------------------------------
    async def conversations(self) -> list[str]:
        threads = await self.publisher.call(lambda client: client.direct_threads(20))
        return [str(t.id) for t in threads]

    async def messages(self, conversation_id: str) -> list[dict[str, Any]]:
        thread = await self.publisher.call(
            lambda client: client.direct_thread(int(conversation_id))
        )
        names = {str(u.pk): u.username for u in thread.users}
        names[self.ig_user_id] = self.publisher.username
        return [
            {
                "id": str(m.id),
                "created_time": timestamp(_utc(m.timestamp)),
                "from": {"id": str(m.user_id), "username": names.get(str(m.user_id))},
                "message": m.text or "",
            }
            for m in thread.messages
        ]

    async def thread(self, user_id: str) -> list[dict[str, Any]]:
        """The messages with one person: the one-to-one thread they are in (none: empty)."""
        threads = await self.publisher.call(lambda client: client.direct_threads(20))
        for found in threads:
            people = {str(u.pk) for u in found.users}
            if not found.is_group and people == {user_id}:
                return await self.messages(str(found.id))
        return []

    async def profile(self, user_id: str) -> dict[str, Any]:
        """Not needed here: instagrapi's threads name their people."""
        return {}

    async def send_message(self, recipient_id: str, text: str) -> str:
        sent = await self.publisher.call(
            lambda client: client.direct_send(text, user_ids=[int(recipient_id)])
        )
        return str(sent.id)
