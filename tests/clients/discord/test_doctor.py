"""`carrier doctor`'s Discord checks against the loopback FakeDiscord's REST API (discord.py is
pointed at it while it is open, as the client is)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from carrier.character import Character
from carrier.doctor import ClientTarget, Result
from clients.discord.doctor import check
from clients.discord.fake import FakeDiscord


def target(environ: dict[str, str], config: dict[str, Any] | None = None) -> ClientTarget:
    character = Character.model_validate(
        {
            "name": "Harbor",
            "bio": ["Harbor hosts a game-dev server."],
            "clients": ["discord"],
            "settings": {"secrets": {"DISCORD_API_TOKEN": "$HARBOR_DISCORD_TOKEN"}},
        }
    )
    return ClientTarget(
        client="discord",
        character=character,
        config=config or {},
        environ=environ,
        timeout=60.0,
    )


def by_name(results: Sequence[Result]) -> dict[str, Result]:
    return {r.name: r for r in results}


async def test_doctor_discord_token_accepted_and_intent_enabled() -> None:
    async with FakeDiscord(bot_name="Harbor") as fake:
        results = await check(target({"HARBOR_DISCORD_TOKEN": fake.token}))

        assert [(r.name, r.status) for r in results] == [
            ("discord token", "ok"),
            ("discord intents", "ok"),
        ]
        assert f"id {fake.bot_id}" in results[0].detail
        assert fake.rest.unknown == []
        assert fake.token not in " ".join(r.detail + r.fix for r in results)


async def test_doctor_discord_bad_token() -> None:
    async with FakeDiscord() as fake:
        results = by_name(await check(target({"HARBOR_DISCORD_TOKEN": "not-the-bot-token"})))

        token = results["discord token"]
        assert token.status == "fail"
        assert (
            token.detail == "Discord refused the token in HARBOR_DISCORD_TOKEN (401 Unauthorized)"
        )
        assert "Reset Token, and set HARBOR_DISCORD_TOKEN" in token.fix
        assert results["discord intents"].status == "skip"
        assert fake.token not in token.detail


async def test_doctor_discord_message_content_intent_off() -> None:
    async with FakeDiscord(message_content_enabled=False) as fake:
        results = by_name(await check(target({"HARBOR_DISCORD_TOKEN": fake.token})))

        assert results["discord token"].status == "ok"
        intents = results["discord intents"]
        assert intents.status == "fail" and "close code 4014" in intents.detail
        assert 'enable "Message Content Intent"' in intents.fix


async def test_doctor_discord_members_intent_only_when_asked() -> None:
    async with FakeDiscord(members_enabled=False) as fake:
        env = {"HARBOR_DISCORD_TOKEN": fake.token}
        plain = by_name(await check(target(env)))
        asked = by_name(await check(target(env, {"membersIntent": True})))

        assert "discord members intent" not in plain
        assert asked["discord members intent"].status == "fail"
        assert "membersIntent: false" in asked["discord members intent"].fix


async def test_doctor_discord_token_unset_names_the_variable() -> None:
    results = await check(target({}))

    assert len(results) == 1 and results[0].status == "fail"
    assert results[0].detail == "HARBOR_DISCORD_TOKEN is not set"
    assert "settings.secrets.DISCORD_API_TOKEN: $HARBOR_DISCORD_TOKEN" in results[0].fix


async def test_doctor_discord_config_problems_are_the_clients_own() -> None:
    results = await check(target({"HARBOR_DISCORD_TOKEN": "x"}, {"maxMessageLength": 5}))

    assert results[0].name == "discord config" and results[0].status == "fail"
    assert "max_message_length" in results[0].detail or "maxMessageLength" in results[0].detail
