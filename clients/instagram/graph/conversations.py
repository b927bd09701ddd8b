"""The Graph API's conversation endpoints: comments, replies, mentions, hides and messages.

The same :class:`~clients.instagram.graph.GraphAPI` (token in a header, masked in errors) is
used; these calls are what answering people needs, and what a restart reads before it sends a
reply again (a comment's replies, a conversation's messages):

- ``GET /{media-id}/comments?fields=...,replies{...}`` (the comments and their replies),
  ``GET /{comment-id}``, ``GET /{comment-id}/replies``, ``POST /{comment-id}/replies``
- ``POST /{comment-id}?hide=true|false``, ``DELETE /{comment-id}``
- ``GET /{ig-user-id}?fields=mentioned_comment.comment_id(ID){...}``,
  ``POST /{ig-user-id}/mentions``
- ``GET /{ig-user-id}/conversations?platform=instagram&user_id=IGSID``,
  ``GET /{conversation-id}?fields=messages{...}``
- ``POST /{ig-user-id}/messages`` (JSON: ``recipient``, ``message``): a DM, or a private reply
  to a comment (``recipient: {"comment_id": ...}``)

A send outside Instagram's messaging window is refused by Meta with code 10, subcode 2534022;
:func:`outside_window` recognises that answer.
"""

from __future__ import annotations

from typing import Any, Protocol

from clients.instagram.errors import GraphAPIError
from clients.instagram.graph.api import GraphAPI

__all__ = ["OUTSIDE_WINDOW_SUBCODE", "ConversationAPI", "Conversations", "outside_window"]

OUTSIDE_WINDOW_SUBCODE = 2534022
_COMMENT_FIELDS = "id,text,timestamp,username,from,media,parent_id,hidden"
_MESSAGE_FIELDS = "id,created_time,from,to,message"


def outside_window(error: GraphAPIError) -> bool:
    """Whether Meta refused a message because the person's messaging window is closed."""
    return error.code == 10 and error.subcode == OUTSIDE_WINDOW_SUBCODE


class Conversations(Protocol):
    """The calls answering people needs, by the Graph API (:class:`ConversationAPI`) or
    instagrapi (:class:`~clients.instagram.private.conversations.PrivateConversationAPI`);
    items in the Graph API's shapes."""

    @property
    def ig_user_id(self) -> str: ...
    async def recent_media(self, limit: int = 10) -> list[dict[str, Any]]: ...
    async def media_comments(self, media_id: str) -> list[dict[str, Any]]: ...
    async def replies(
        self, comment_id: str, *, media_id: str | None = None
    ) -> list[dict[str, Any]]: ...
    async def reply(self, comment_id: str, text: str, *, media_id: str | None = None) -> str: ...
    async def hide(self, comment_id: str, hidden: bool = True) -> None: ...
    async def delete(self, comment_id: str, *, media_id: str | None = None) -> None: ...
    async def mentions(self) -> list[dict[str, Any]]: ...
    async def mentioned_comment(
        self, comment_id: str, *, media_id: str | None = None
    ) -> dict[str, Any]: ...
    async def reply_to_mention(self, comment_id: str, media_id: str, text: str) -> str: ...
    async def send_message(self, recipient_id: str, text: str) -> str: ...
    async def private_reply(
        self, comment_id: str, text: str, *, user_id: str | None = None
    ) -> str: ...
    async def conversations(self) -> list[str]: ...
    async def messages(self, conversation_id: str) -> list[dict[str, Any]]: ...
    async def thread(self, user_id: str) -> list[dict[str, Any]]: ...
    async def profile(self, user_id: str) -> dict[str, Any]: ...


class ConversationAPI:
    """Comment and message calls for one account, over a :class:`GraphAPI`."""

    def __init__(self, api: GraphAPI) -> None:
        self.api = api

    @property
    def ig_user_id(self) -> str:
        return self.api.ig_user_id

    # -- comments ----------------------------------------------------------------------------
    async def comment(self, comment_id: str) -> dict[str, Any]:
        return await self.api._call("GET", comment_id, params={"fields": _COMMENT_FIELDS})

    async def recent_media(self, limit: int = 10) -> list[dict[str, Any]]:
        """The account's newest media, newest first."""
        return await self.api.recent_media(limit=limit)

    async def replies(
        self, comment_id: str, *, media_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The replies under a comment (the account's own among them)."""
        body = await self.api._call(
            "GET", f"{comment_id}/replies", params={"fields": _COMMENT_FIELDS}
        )
        return list(body.get("data") or [])

    async def reply(self, comment_id: str, text: str, *, media_id: str | None = None) -> str:
        """A public reply under a comment; its id (``media_id`` is not needed here)."""
        body = await self.api._call("POST", f"{comment_id}/replies", data={"message": text})
        return str(body["id"])

    async def hide(self, comment_id: str, hidden: bool = True) -> None:
        await self.api._call("POST", comment_id, data={"hide": "true" if hidden else "false"})

    async def delete(self, comment_id: str, *, media_id: str | None = None) -> None:
        """Delete a comment on the account's media (``DELETE /{comment-id}``): for good."""
        await self.api._call("DELETE", comment_id)

    async def media_comments(self, media_id: str) -> list[dict[str, Any]]:
        """A media's comments and their replies, flat (each reply with ``parent_id``), in one
        call: the replies come by field expansion (``replies{...}``)."""
        body = await self.api._call(
            "GET",
            f"{media_id}/comments",
            params={"fields": f"{_COMMENT_FIELDS},replies{{{_COMMENT_FIELDS}}}"},
        )
        found: list[dict[str, Any]] = []
        for comment in body.get("data") or []:
            replies = (comment.pop("replies", None) or {}).get("data") or []
            found.append(comment)
            for reply in replies:
                reply.setdefault("parent_id", comment.get("id"))
                reply.setdefault("media", comment.get("media") or {"id": media_id})
                found.append(reply)
        return found

    # -- mentions ----------------------------------------------------------------------------
    async def mentions(self) -> list[dict[str, Any]]:
        """None to list: the Graph API names a mention only in its webhook (``mentions``)."""
        return []

    async def mentioned_comment(
        self, comment_id: str, *, media_id: str | None = None
    ) -> dict[str, Any]:
        """A comment that @mentions the account (on someone else's media), with its replies."""
        fields = (
            f"mentioned_comment.comment_id({comment_id})"
            f"{{id,text,timestamp,username,from,replies{{{_COMMENT_FIELDS}}}}}"
        )
        body = await self.api._call("GET", self.ig_user_id, params={"fields": fields})
        return dict(body.get("mentioned_comment") or {})

    async def reply_to_mention(self, comment_id: str, media_id: str, text: str) -> str:
        body = await self.api._call(
            "POST",
            f"{self.ig_user_id}/mentions",
            data={"comment_id": comment_id, "media_id": media_id, "message": text},
        )
        return str(body.get("id") or "")

    # -- messages ----------------------------------------------------------------------------
    async def send_message(self, recipient_id: str, text: str) -> str:
        """A DM to a person (by Instagram-scoped id); the message id."""
        return await self._send({"id": recipient_id}, text)

    async def private_reply(self, comment_id: str, text: str, *, user_id: str | None = None) -> str:
        """A DM to a comment's author, about that comment (once per comment)."""
        return await self._send({"comment_id": comment_id}, text)

    async def _send(self, recipient: dict[str, str], text: str) -> str:
        body = await self.api._call(
            "POST",
            f"{self.ig_user_id}/messages",
            json={"recipient": recipient, "message": {"text": text}},
        )
        return str(body.get("message_id") or "")

    async def conversations(self) -> list[str]:
        """The ids of the account's conversations (``GET /{ig-user-id}/conversations``)."""
        found = await self.api._call(
            "GET", f"{self.ig_user_id}/conversations", params={"platform": "instagram"}
        )
        return [str(c["id"]) for c in found.get("data") or [] if c.get("id")]

    async def messages(self, conversation_id: str) -> list[dict[str, Any]]:
        """A conversation's messages, newest first."""
        body = await self.api._call(
            "GET", conversation_id, params={"fields": f"messages{{{_MESSAGE_FIELDS}}}"}
        )
        return list((body.get("messages") or {}).get("data") or [])

    async def profile(self, user_id: str) -> dict[str, Any]:
        """A person who wrote to the account (``GET /{igsid}?fields=name,username``): a DM's
        webhook names them by id only."""
        return await self.api._call("GET", user_id, params={"fields": "name,username"})

    async def thread(self, user_id: str) -> list[dict[str, Any]]:
        """The messages between the account and a person, newest first (empty: none yet)."""
        found = await self.api._call(
            "GET",
            f"{self.ig_user_id}/conversations",
            params={"platform": "instagram", "user_id": user_id},
        )
        conversations = list(found.get("data") or [])
        if not conversations:
            return []
        body = await self.api._call(
            "GET",
            str(conversations[0]["id"]),
            params={"fields": f"messages{{{_MESSAGE_FIELDS}}}"},
        )
        return list((body.get("messages") or {}).get("data") or [])
