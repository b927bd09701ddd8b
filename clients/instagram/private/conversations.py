"""Comments and DMs through instagrapi, in the shapes the Graph side uses.

:class:`PrivateConversationAPI` answers the calls the inbound side makes
(:class:`~clients.instagram.graph.conversations.ConversationAPI`'s names: the account's recent
media, a media's comments, a comment's replies, a reply; the conversations, their messages, a
DM) through the publisher's logged-in instagrapi client: its saved, encrypted session reused,
``delay_range`` pauses between requests like a person, and a challenge or a password problem
raised as :class:`~clients.instagram.errors.OperatorActionRequired` (as publishing does),
throttling as a cooldown. Items come back as the Graph API writes them (``from.id``,
``text``/``message``, ``timestamp``/``created_time``), so the poller and the reply check work
unchanged. Hiding comments, private replies and mentions are the Graph API's only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from clients.instagram.errors import InstagramError
from clients.instagram.private.publisher import InstagrapiPublisher

__all__ = ["PrivateConversationAPI"]


def timestamp(moment: datetime) -> str:
    """A time as the Graph API writes it (``2025-06-01T12:00:00+0000``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _utc(moment: datetime) -> datetime:
    """instagrapi gives direct messages' times as naive local times, comments' as UTC."""
    return moment.astimezone(UTC) if moment.tzinfo is None else moment


def _comment(comment: Any, media_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(comment.pk),
        "text": comment.text,
        "from": {"id": str(comment.user.pk), "username": comment.user.username},
        "username": comment.user.username,
        "timestamp": timestamp(_utc(comment.created_at_utc)),
        "media": {"id": media_id},
    }
    if comment.replied_to_comment_id:
        body["parent_id"] = str(comment.replied_to_comment_id)
    return body


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
        comments = await self.publisher.call(lambda client: client.media_comments(media_id))
        return [_comment(c, media_id) for c in comments if not c.replied_to_comment_id]

    async def replies(
        self, comment_id: str, *, media_id: str | None = None
    ) -> list[dict[str, Any]]:
        if media_id is None:
            raise InstagramError("reading a comment's replies through instagrapi needs its media")
        comments = await self.publisher.call(lambda client: client.media_comments(media_id))
        return [
            _comment(c, media_id)
            for c in comments
            if str(c.replied_to_comment_id or "") == comment_id
        ]

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
        raise InstagramError("hiding comments needs the Graph API (publisher: graph)")

    async def private_reply(self, comment_id: str, text: str) -> str:
        raise InstagramError("private replies need the Graph API (publisher: graph)")

    async def mentioned_comment(self, comment_id: str) -> dict[str, Any]:
        raise InstagramError("mentions need the Graph API (publisher: graph)")

    async def reply_to_mention(self, comment_id: str, media_id: str, text: str) -> str:
        raise InstagramError("mentions need the Graph API (publisher: graph)")

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
        for conversation in await self.conversations():
            found = await self.messages(conversation)
            if any(str(m["from"]["id"]) == user_id for m in found):
                return found
        return []

    async def profile(self, user_id: str) -> dict[str, Any]:
        """Not needed here: instagrapi's threads name their people."""
        return {}

    async def send_message(self, recipient_id: str, text: str) -> str:
        sent = await self.publisher.call(
            lambda client: client.direct_send(text, user_ids=[int(recipient_id)])
        )
        return str(sent.id)
