"""A steered model cannot ping crowds or strangers on Discord: @everyone/@here are escaped
whatever follows them or hides inside them, and by default a reply may ping only the person it
answers. Run against the loopback FakeDiscord, which records every payload sent (the Discord
harness of tests/clients/discord, shared through this folder's conftest)."""

from __future__ import annotations

import pytest

from clients.discord.config import parse_config
from clients.discord.sender import allowed_mentions
from clients.discord.text import escape_mass_mentions
from tests.clients.discord.conftest import Harness, xml

ZWSP = "\u200b"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@everyoneX come", f"@{ZWSP}everyoneX come"),
        ("@here!", f"@{ZWSP}here!"),
        ("@here_and_now", f"@{ZWSP}here_and_now"),
        ("@\u200deveryone", f"@{ZWSP}everyone"),  # a zero-width joiner in between
        ("@\u2060\u200b\ufeffhere", f"@{ZWSP}here"),  # several invisible characters
        ("@\u00adeveryone", f"@{ZWSP}everyone"),  # a soft hyphen
        ("\uff20everyone", f"\uff20{ZWSP}everyone"),  # the fullwidth at sign
        ("@EVERYONE @Here", f"@{ZWSP}EVERYONE @{ZWSP}Here"),
        ("x@everyone.dev", f"x@{ZWSP}everyone.dev"),
        ("every one here, @ everyone", "every one here, @ everyone"),
    ],
)
def test_mentions_mass_mentions_are_escaped_by_prefix(text: str, expected: str) -> None:
    assert escape_mass_mentions(text) == expected
    assert escape_mass_mentions(expected) == expected  # escaping twice changes nothing


def test_mentions_client_wide_default_pings_no_user() -> None:
    # The discord.Client default (a safety net for a send that passes nothing) has no author.
    config = parse_config({})
    assert allowed_mentions(config).to_dict() == {"parse": []}
    assert allowed_mentions(config, author=42).to_dict() == {"parse": [], "users": [42]}


async def test_mentions_a_reply_pings_only_the_person_it_answers(harness: Harness) -> None:
    h = harness
    h.answer = lambda r: xml(
        f"@everyoneX and \uff20here and @\u200bhere: <@{h.bob['id']}>, <@!{h.otherbot['id']}>, "
        f"<@&{h.guild.bot_role}> and you <@{h.ana['id']}>, look!"
    )
    await h.start()
    await h.fake.post(
        h.ana,
        f"{h.mention()} announce my stream",
        channel=h.channel("general"),
        mentions=[h.fake.bot],
    )
    await h.settle()

    [reply] = h.fake.sent
    mentions = reply.payload["allowed_mentions"]
    assert mentions["parse"] == []  # no @everyone/@here, no roles, no user by parsing
    assert mentions["users"] == [int(h.ana["id"])]  # only the person being answered
    assert mentions.get("roles", []) == [] and mentions["replied_user"] is False
    for crowd in ("@everyone", "\uff20here", "@here"):
        assert crowd not in reply.content
    assert f"@{ZWSP}everyoneX" in reply.content and f"\uff20{ZWSP}here" in reply.content


async def test_mentions_a_rate_limit_notice_pings_only_its_addressee(harness: Harness) -> None:
    h = harness
    await h.start({"rateLimit": {"messages": 1, "perSeconds": 3600, "notice": "slow down"}})
    for text in ("one", "two"):
        await h.fake.post(h.bob, text)
        await h.settle()
    notice = h.fake.sent[-1]
    assert notice.content == "slow down"
    assert notice.payload["allowed_mentions"]["users"] == [int(h.bob["id"])]


async def test_mentions_slash_ask_pings_only_the_caller(harness: Harness) -> None:
    h = harness
    h.answer = lambda r: xml(f"<@{h.bob['id']}> @everyone! ask <@{h.ana['id']}>")
    await h.start()
    await h.fake.slash(h.ana, "ask", channel=h.channel("random"), options={"question": "who?"})
    await h.fake.wait_until(lambda: len(h.fake.followups) == 1)

    [followup] = h.fake.followups
    assert followup["allowed_mentions"]["parse"] == []
    assert followup["allowed_mentions"]["users"] == [int(h.ana["id"])]
    assert "@everyone" not in followup["content"]


@pytest.mark.parametrize(
    ("setting", "parse", "users"),
    [
        ({"users": True}, ["users"], None),  # widened: any user the text mentions
        ({"users": False, "repliedUser": True}, [], None),  # nobody; the reply pings its author
    ],
)
async def test_mentions_the_character_can_widen_or_narrow_user_pings(
    harness: Harness, setting: dict[str, object], parse: list[str], users: object
) -> None:
    h = harness
    h.answer = lambda r: xml(f"hi <@{h.bob['id']}> @everyone")
    await h.start({"allowedMentions": setting})
    await h.fake.post(h.ana, "hello")
    await h.settle()

    mentions = h.fake.sent[0].payload["allowed_mentions"]
    assert mentions["parse"] == parse and mentions.get("users") == users
    assert mentions["replied_user"] is bool(setting.get("repliedUser"))
    assert "@everyone" not in h.fake.sent[0].content  # never widened to crowds


async def test_mentions_a_guild_can_widen_user_pings_for_itself(harness: Harness) -> None:
    h = harness
    await h.start({"guilds": {str(h.guild.id): {"allowedMentions": {"users": True}}}})
    await h.fake.post(h.ana, "hello")  # a DM: the default holds
    await h.settle()
    await h.fake.post(
        h.ana, f"{h.mention()} hello", channel=h.channel("general"), mentions=[h.fake.bot]
    )
    await h.settle()
    in_dm, in_guild = (s.payload["allowed_mentions"] for s in h.fake.sent)
    assert in_dm["parse"] == [] and in_dm["users"] == [int(h.ana["id"])]
    assert in_guild["parse"] == ["users"]


def test_mentions_everyone_cannot_be_configured() -> None:
    from carrier.errors import ConfigError

    with pytest.raises(ConfigError, match="never pings @everyone"):
        parse_config({"allowedMentions": {"everyone": True}})
