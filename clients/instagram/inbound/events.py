"""What people write to the persona on Instagram, read from Meta's webhook deliveries.

A delivery (``{"object": "instagram", "entry": [...]}``) carries, per entry (one Instagram
professional account, ``entry.id``):

- ``changes[]`` with ``field`` ``comments`` (a comment on the account's media: ``value.id``,
  ``value.from``, ``value.text``, ``value.media.id``, ``value.parent_id`` for a reply) or
  ``mentions`` (an @mention in a comment elsewhere: ``value.comment_id``, ``value.media_id``;
  its text is read from the API);
- ``messaging[]``: direct messages (``sender.id``, ``recipient.id``, ``timestamp`` in ms,
  ``message.mid``, ``message.text``; ``message.is_echo`` for the account's own).

Each becomes an :class:`InboundEvent` with a key made from the platform's own id (the comment id,
the message's ``mid``), so a delivery Meta repeats is recognised as the same event.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

__all__ = ["EventKind", "InboundEvent", "parse_delivery"]


class EventKind(StrEnum):
    COMMENT = "comment"
    """A comment (or a reply to one) on the account's media."""
    MENTION = "mention"
    """A comment elsewhere that @mentions the account."""
    MESSAGE = "message"
    """A direct message."""


class InboundEvent(BaseModel):
    """One thing a person wrote to the account, as a job's payload."""

    kind: EventKind
    account_id: str
    """The persona's Instagram professional account (``entry.id``)."""
    id: str
    """The comment id, or the message's ``mid``."""
    text: str = ""
    user_id: str | None = None
    """The writer's Instagram-scoped id (``from.id``, ``sender.id``)."""
    username: str | None = None
    media_id: str | None = None
    parent_id: str | None = None
    """For a reply to a comment: the comment it answers (its thread is the parent's)."""
    at: datetime | None = None
    """When it was written (messages carry it; comments are read when needed)."""
    own: bool = False
    """Written by the account itself (its own comment, an echo of its own DM)."""

    @property
    def key(self) -> str:
        """The job's idempotency key: one job per event, however often it is delivered."""
        return f"instagram:inbound:{self.kind.value}:{self.id}"


def parse_delivery(body: bytes) -> tuple[list[InboundEvent], int]:
    """The events in a webhook delivery, and how many changes it carried that are not ours to
    handle (other fields). Raises ``ValueError`` when the body is not an Instagram delivery."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise ValueError("the body is not JSON") from None
    if not isinstance(payload, dict) or payload.get("object") != "instagram":
        raise ValueError("not an Instagram delivery (object must be 'instagram')")
    entries = payload.get("entry")
    if not isinstance(entries, list):
        raise ValueError("an Instagram delivery has an entry list")
    events: list[InboundEvent] = []
    ignored = 0
    for entry in entries:
        if not isinstance(entry, dict):
            ignored += 1
            continue
        account = str(entry.get("id") or "")
        for change in _list(entry.get("changes")):
            event = _change(account, change)
            if event is None:
                ignored += 1
            else:
                events.append(event)
        for item in _list(entry.get("messaging")):
            event = _message(account, item)
            if event is None:
                ignored += 1
            else:
                events.append(event)
    return events, ignored


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _change(account: str, change: Any) -> InboundEvent | None:
    if not isinstance(change, dict) or not isinstance(change.get("value"), dict):
        return None
    field, value = change.get("field"), change["value"]
    if field == "comments" and value.get("id"):
        sender = value.get("from") or {}
        user_id = str(sender.get("id") or "") or None
        return InboundEvent(
            kind=EventKind.COMMENT,
            account_id=account,
            id=str(value["id"]),
            text=str(value.get("text") or ""),
            user_id=user_id,
            username=sender.get("username"),
            media_id=str((value.get("media") or {}).get("id") or "") or None,
            parent_id=str(value.get("parent_id") or "") or None,
            own=user_id == account,
        )
    if field == "mentions" and value.get("comment_id"):
        return InboundEvent(
            kind=EventKind.MENTION,
            account_id=account,
            id=str(value["comment_id"]),
            media_id=str(value.get("media_id") or "") or None,
        )
    return None


def _message(account: str, item: Any) -> InboundEvent | None:
    if not isinstance(item, dict) or not isinstance(item.get("message"), dict):
        return None  # reads, reactions, postbacks: not something to answer
    message = item["message"]
    if not message.get("mid") or message.get("is_deleted"):
        return None
    sender = str((item.get("sender") or {}).get("id") or "")
    stamp = item.get("timestamp")
    at = datetime.fromtimestamp(int(stamp) / 1000, UTC) if isinstance(stamp, int | float) else None
    return InboundEvent(
        kind=EventKind.MESSAGE,
        account_id=account,
        id=str(message["mid"]),
        text=str(message.get("text") or ""),
        user_id=sender or None,
        at=at,
        own=bool(message.get("is_echo")) or sender == account,
    )
