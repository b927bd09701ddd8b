"""Whom the persona answers on Instagram: ``clientConfig.instagram.conversations``.

By default it answers comments that ask something, @mentions and DMs; it never answers its own
comments, the accounts listed in ``ignoreAccounts`` (other brands), spam (listed phrases, more
links than ``maxLinks``), or a reply in a comment's thread that opens by naming someone else
(``@ana what lens?`` is asked of ana); and it keeps to caps: replies per hour, replies per post
per day, and one reply per person per ``personCooldown``. A skipped event is still stored (``ignored``, the
reason in its metadata) so the room's history has no gaps::

    clientConfig:
      instagram:
        conversations:
          comments: questions        # questions | all | none
          mentions: true
          directMessages: true
          replyAs: comment           # comment (public reply) | private (a DM to the commenter)
          ignoreAccounts: [otherbrand, "@rivalcafe"]
          spamPhrases: ["free followers", "dm for promo"]
          maxLinks: 0
          maxRepliesPerHour: 30
          maxRepliesPerPost: 20      # per post, per rolling 24 h
          personCooldown: 10m
          poll: {enabled: false, interval: 5m, media: 10}   # without webhooks: see poller.py
          approval: none             # required: each reply waits for a human
          approvalExpiry: 6h

The caps are counted in the Store (rolling windows kept in a setting per agent), so a restart
keeps them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from carrier.memory.base import Store
from carrier.types import utcnow
from clients.instagram.inbound.events import EventKind, InboundEvent
from clients.instagram.plan import Approval, Seconds

__all__ = [
    "Caps",
    "ConversationSettings",
    "Decision",
    "PollSettings",
    "addressed_to",
    "decide",
    "spam_reason",
]

_LINK = re.compile(r"(https?://|www\.)\S+|\b[a-z0-9-]+\.(com|net|org|io|shop|ly|link)\b", re.I)
_QUESTION_WORDS = re.compile(
    r"^\s*(who|what|when|where|why|how|which|can|could|do|does|did|is|are|will|would|should)\b",
    re.I,
)
_ADDRESSED = re.compile(r"^\s*@([A-Za-z0-9._]+)")
DEFAULT_SPAM = (
    "free followers",
    "dm for promo",
    "dm us for",
    "check my profile",
    "promote your",
    "crypto giveaway",
)


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class PollSettings(_Section):
    """``conversations.poll``: look for new comments and DMs without webhooks (a deployment
    with no public URL). Each round reads the recent media's comments and the conversations:
    ``2 + media + conversations`` calls, so the default (every 5 minutes, 10 media) stays far
    inside the Graph API's 200 calls per hour."""

    enabled: bool = False
    interval: Seconds = Field(default=300.0, ge=60)
    media: int = Field(default=10, ge=1, le=50)
    """How many of the newest posts' comments are read."""


class ConversationSettings(_Section):
    """The ``clientConfig.instagram.conversations`` section."""

    enabled: bool = True
    comments: Literal["questions", "all", "none"] = "questions"
    """Which comments on the account's media get a reply."""
    mentions: bool = True
    direct_messages: bool = True
    reply_as: Literal["comment", "private"] = "comment"
    """How a comment is answered: a public reply, or a private reply (a DM to its author)."""
    ignore_accounts: list[str] = Field(default_factory=list)
    """Usernames (or ids) never answered: other brands, partners, bots."""
    spam_phrases: list[str] = Field(default_factory=lambda: list(DEFAULT_SPAM))
    max_links: int = Field(default=0, ge=0)
    """A comment or mention with more links than this is spam."""
    max_replies_per_hour: int = Field(default=30, ge=0)
    max_replies_per_post: int = Field(default=20, ge=0)
    """Replies under one post within a rolling 24 h."""
    person_cooldown: Seconds = Field(default=600.0, ge=0)
    """After answering someone, their next comments within this time are not answered."""
    poll: PollSettings = Field(default_factory=PollSettings)
    approval: Approval = False
    """``required``: each reply waits for a human (``/jobs/{id}/approve``, with an edited
    ``reply`` if wanted) before it is sent; ``none`` (default): replies go at once."""
    approval_expiry: Seconds = Field(default=6 * 3600.0, gt=0)
    """A reply not approved within this time is never sent."""

    @field_validator("ignore_accounts")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return [v.strip().lstrip("@").lower() for v in value if v.strip()]


@dataclass(frozen=True, slots=True)
class Decision:
    answer: bool
    reason: str


def decide(event: InboundEvent, settings: ConversationSettings, *, own_username: str) -> Decision:
    """Whether an event is answered, by its content alone (the caps are :class:`Caps`)."""
    if not settings.enabled:
        return Decision(False, "conversations are off (conversations.enabled: false)")
    who = {(event.username or "").lower(), (event.user_id or "").lower()} - {""}
    if event.own or (own_username and own_username.lower() in who):
        return Decision(False, "the persona's own comment")
    if who & set(settings.ignore_accounts):
        return Decision(False, "the account is in conversations.ignoreAccounts")
    if event.kind is EventKind.MESSAGE:
        if not settings.direct_messages:
            return Decision(False, "direct messages are off (conversations.directMessages)")
        return Decision(True, "direct message")
    spam = spam_reason(event.text, settings)
    if spam:
        return Decision(False, f"spam: {spam}")
    if event.kind is EventKind.MENTION:
        if not settings.mentions:
            return Decision(False, "mentions are off (conversations.mentions)")
        return Decision(True, "mentioned")
    if settings.comments == "none":
        return Decision(False, "comments are not answered (conversations.comments: none)")
    to = addressed_to(event.text) if event.parent_id else None
    if to and to != own_username.lower():
        return Decision(False, f"a reply to @{to}, not to the persona")
    if settings.comments == "questions" and not is_question(event.text):
        if own_username and f"@{own_username.lower()}" in event.text.lower():
            return Decision(True, "mentioned in a comment")
        return Decision(False, "not a question (conversations.comments: questions)")
    return Decision(True, "comment")


def addressed_to(text: str) -> str | None:
    """The account a comment opens by naming (``@ana what lens?`` → ``ana``), lowercased."""
    found = _ADDRESSED.match(text)
    return found.group(1).lower() if found else None


def is_question(text: str) -> bool:
    return "?" in text or bool(_QUESTION_WORDS.match(text))


def spam_reason(
    text: str,
    settings: ConversationSettings,
    *,
    max_links: int | None = None,
    links_only: bool = False,
) -> str | None:
    """Why ``text`` is spam (a listed phrase, too many links), or ``None``. ``max_links``
    replaces ``settings.max_links`` (moderation's own limit)."""
    lowered = text.lower()
    if not links_only:
        for phrase in settings.spam_phrases:
            if phrase.lower() in lowered:
                return f"contains {phrase!r}"
    limit = settings.max_links if max_links is None else max_links
    links = len(_LINK.findall(text))
    if links > limit:
        where = "conversations.maxLinks" if max_links is None else "moderation.maxLinks"
        return f"{links} link(s) ({where}: {limit})"
    return None


class Caps:
    """Replies per hour, per post (24 h) and per person (cooldown), counted in the Store."""

    def __init__(
        self, store: Store, agent_id: str, *, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.store = store
        self.key = f"instagram:{agent_id}:conversation-caps"
        self.clock = clock
        self._lock = asyncio.Lock()

    async def take(self, event: InboundEvent, settings: ConversationSettings) -> str | None:
        """Count a reply to ``event`` if every cap allows it; else the reason it does not."""
        async with self._lock:
            now = self.clock()
            raw = await self.store.get_setting(self.key) or []
            kept = [
                (datetime.fromisoformat(at), post, person)
                for at, post, person in raw
                if datetime.fromisoformat(at) > now - timedelta(hours=24)
            ]
            hour = [k for k in kept if k[0] > now - timedelta(hours=1)]
            if len(hour) >= settings.max_replies_per_hour:
                return f"{len(hour)} replies in the last hour (conversations.maxRepliesPerHour)"
            post = event.media_id or ""
            if event.kind is not EventKind.MESSAGE and post:
                on_post = [k for k in kept if k[1] == post]
                if len(on_post) >= settings.max_replies_per_post:
                    return (
                        f"{len(on_post)} replies on this post in 24 h "
                        "(conversations.maxRepliesPerPost)"
                    )
            person = event.user_id or event.username or ""
            cooldown = timedelta(seconds=settings.person_cooldown)
            if event.kind is not EventKind.MESSAGE and person:
                recent = [k for k in kept if k[2] == person and k[0] > now - cooldown]
                if recent:
                    return "answered this person moments ago (conversations.personCooldown)"
            kept.append((now, post, person))
            await self.store.set_setting(
                self.key, [(at.isoformat(), p, who) for at, p, who in kept]
            )
            return None
