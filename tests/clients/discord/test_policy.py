"""The gate, the bot-loop guard and the rate limiter, on their own."""

from __future__ import annotations

import pytest

from clients.discord.config import RateLimit, parse_config
from clients.discord.policy import BotLoopGuard, Facts, RateLimiter, Verdict, gate
from clients.discord.text import escape_mass_mentions, human_size, names_in, tidy


def facts(**kw: bool) -> Facts:
    base = {
        "author_is_bot": False,
        "is_direct": False,
        "is_thread": False,
        "addressed": False,
        "channel_allowed": True,
    }
    return Facts(**{**base, **kw})


def test_gate_direct_messages_pass_unless_turned_off() -> None:
    assert gate(facts(is_direct=True), parse_config({})) is None
    reason = gate(facts(is_direct=True), parse_config({"shouldIgnoreDirectMessages": True}))
    assert reason is not None and "shouldIgnoreDirectMessages" in reason


def test_gate_addressed_messages_pass_any_channel() -> None:
    policy = parse_config(
        {
            "allowedChannels": ["general"],
            "shouldRespondOnlyToMentions": True,
            "respondInThreads": False,
        }
    )
    assert gate(facts(addressed=True, channel_allowed=False, is_thread=True), policy) is None


def test_gate_unaddressed_chatter() -> None:
    policy = parse_config({"allowedChannels": ["general"]})
    assert gate(facts(), policy) is None  # allowed channel: the runtime decides
    assert "allowedChannels" in (gate(facts(channel_allowed=False), policy) or "")
    only = parse_config({"shouldRespondOnlyToMentions": True})
    assert "mention-only" in (gate(facts(), only) or "")
    no_threads = parse_config({"respondInThreads": False})
    assert "respondInThreads" in (gate(facts(is_thread=True), no_threads) or "")


def test_gate_bots_ignored_by_default_even_when_addressed() -> None:
    assert gate(facts(author_is_bot=True, addressed=True), parse_config({})) is not None
    assert (
        gate(
            facts(author_is_bot=True, addressed=True),
            parse_config({"shouldIgnoreBotMessages": False}),
        )
        is None
    )


def test_bot_loop_guard_counts_per_channel_and_resets_on_people() -> None:
    guard = BotLoopGuard()
    assert [guard.allow("c1", 2) for _ in range(4)] == [True, True, False, False]
    assert guard.allow("c2", 2) is True  # another channel counts on its own
    guard.person_spoke("c1")
    assert guard.allow("c1", 2) is True
    assert guard.allow("c1", 0) is False


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_notice_once_per_window() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    limit = RateLimit(messages=2, per_seconds=60)
    verdicts = [limiter.check("ana", limit) for _ in range(5)]
    assert verdicts == [Verdict.ALLOW, Verdict.ALLOW, Verdict.NOTIFY, Verdict.DROP, Verdict.DROP]
    assert limiter.check("bob", limit) is Verdict.ALLOW  # per user
    clock.now += 61
    assert limiter.check("ana", limit) is Verdict.ALLOW
    assert limiter.check("ana", limit) is Verdict.ALLOW
    assert limiter.check("ana", limit) is Verdict.NOTIFY  # a new window, a new notice
    assert limiter.check("ana", None) is Verdict.ALLOW  # no limit configured
    clock.now += 7200
    limiter.prune()
    assert limiter.check("ana", limit) is Verdict.ALLOW


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hey @everyone look", "hey @\u200beveryone look"),
        ("@here!", "@\u200bhere!"),
        ("mail me at a@everyone.dev", "mail me at a@\u200beveryone.dev"),
        ("no pings here", "no pings here"),
    ],
)
def test_escape_mass_mentions(text: str, expected: str) -> None:
    assert escape_mass_mentions(text) == expected


def test_text_helpers() -> None:
    assert names_in("thanks Harbor!", ["harbor"]) and not names_in("harborside", ["harbor"])
    assert not names_in("a b c", ["a", None, ""])  # one-letter names never match
    assert tidy(" , what's up  there ") == "what's up there"
    assert (
        human_size(512) == "512 B"
        and human_size(2048) == "2.0 KB"
        and human_size(None) == "unknown size"
    )
