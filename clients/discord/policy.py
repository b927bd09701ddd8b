"""Who gets through to the runtime: the channel gate, the bot-loop guard and the rate limiter.

All three are plain Python (no discord import) and take their clock as an argument, so they are
tested on their own. The runtime's own should-respond policy decides the rest: the gate only
removes what the server owner excluded (other channels, bots, DMs when off).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from clients.discord.config import DiscordPolicy, RateLimit

__all__ = ["MENTION_ONLY", "BotLoopGuard", "Facts", "RateLimiter", "Verdict", "gate", "observed"]


@dataclass(frozen=True, slots=True)
class Facts:
    """What the gate needs to know about one inbound message."""

    author_is_bot: bool
    is_direct: bool
    is_thread: bool
    addressed: bool
    """Mentions the bot (by id, role, name or nickname) or replies to one of its messages."""
    channel_allowed: bool
    """The channel (or a thread's parent) is in ``allowed_channels``, or that list is empty."""


MENTION_ONLY = "mention-only mode (shouldRespondOnlyToMentions) and the bot was not addressed"
"""The one gate reason under which the message is still kept as conversation (see
:func:`observed`): the bot is in the channel and reads along, it only answers when asked."""


def observed(reason: str) -> bool:
    """Whether a message dropped for ``reason`` is still stored (without a reply), so the room's
    history has no gaps when the bot is mentioned later."""
    return reason == MENTION_ONLY


def gate(facts: Facts, policy: DiscordPolicy) -> str | None:
    """Why the message is dropped before the runtime sees it, or ``None`` to pass it on."""
    if facts.author_is_bot and policy.ignore_bot_messages:
        return "bot messages are ignored (shouldIgnoreBotMessages)"
    if facts.is_direct:
        if policy.ignore_direct_messages:
            return "direct messages are ignored (shouldIgnoreDirectMessages)"
        return None
    if facts.addressed:
        return None
    if facts.is_thread and not policy.respond_in_threads:
        return "threads are off (respondInThreads: false) and the bot was not addressed"
    if not facts.channel_allowed:
        return "channel is not in allowedChannels and the bot was not addressed"
    if policy.respond_only_to_mentions:
        return MENTION_ONLY
    return None


class BotLoopGuard:
    """Counts consecutive bot messages per channel; a message from a person resets the count.

    ``allow(channel, limit)`` is asked for each bot message about to reach the runtime: the first
    ``limit`` pass, the rest are refused until a person speaks in that channel.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def person_spoke(self, channel: str) -> None:
        self._counts.pop(channel, None)

    def allow(self, channel: str, limit: int) -> bool:
        count = self._counts.get(channel, 0)
        if count >= limit:
            return False
        self._counts[channel] = count + 1
        return True

    def count(self, channel: str) -> int:
        return self._counts.get(channel, 0)


class Verdict(Enum):
    ALLOW = "allow"
    NOTIFY = "notify"
    """Over the limit, and this user has not been told yet in this window: send the notice."""
    DROP = "drop"


class RateLimiter:
    """Sliding-window limit per user, with the notice sent at most once per window."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}
        self._told_until: dict[str, float] = {}

    def check(self, user: str, limit: RateLimit | None) -> Verdict:
        if limit is None:
            return Verdict.ALLOW
        now = self._clock()
        hits = self._hits.setdefault(user, deque())
        while hits and hits[0] <= now - limit.per_seconds:
            hits.popleft()
        if len(hits) < limit.messages:
            hits.append(now)
            return Verdict.ALLOW
        if self._told_until.get(user, 0.0) > now:
            return Verdict.DROP
        # Quiet until the oldest counted message leaves the window, i.e. once per window.
        self._told_until[user] = hits[0] + limit.per_seconds
        return Verdict.NOTIFY

    def prune(self) -> None:
        """Forget users with no recent activity (call now and then; memory stays bounded)."""
        now = self._clock()
        for user in [u for u, h in self._hits.items() if not h or h[-1] < now - 3600]:
            self._hits.pop(user, None)
            self._told_until.pop(user, None)
