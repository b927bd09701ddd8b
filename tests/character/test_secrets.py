"""Secrets are environment references; literal secrets are refused without echoing them."""

from __future__ import annotations

import pytest

from carrier.character import SecretRef, find_secret_problems, is_secret_name, parse_secret_ref
from carrier.character.secrets import LiteralSecretError


@pytest.mark.parametrize(
    ("value", "env"),
    [
        ("$OPENAI_API_KEY", "OPENAI_API_KEY"),
        ("${OPENAI_API_KEY}", "OPENAI_API_KEY"),
        ({"env": "MY_KEY"}, "MY_KEY"),
        ("", None),
        (None, None),
    ],
)
def test_secrets_reference_forms_parse(value: object, env: str | None) -> None:
    assert parse_secret_ref("OPENAI_API_KEY", value) == SecretRef("OPENAI_API_KEY", env)


@pytest.mark.parametrize(
    "value", ["sk-abc123", "$", "${UNCLOSED", {"env": "two words"}, {"value": "x"}, 42]
)
def test_secrets_non_references_are_refused(value: object) -> None:
    with pytest.raises(LiteralSecretError) as info:
        parse_secret_ref("K", value)
    assert "sk-abc123" not in str(info.value)


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("DISCORD_API_TOKEN", True),
        ("TWITTER_PASSWORD", True),
        ("clientSecret", True),
        ("APIKEY", True),
        ("maxTokens", False),
        ("keywords", False),
        ("voice", False),
        ("SIMSAI_USERNAME", False),
    ],
)
def test_secrets_secret_names_are_recognized(key: str, secret: bool) -> None:
    assert is_secret_name(key) is secret


def test_secrets_problems_cover_every_place_and_never_the_value() -> None:
    data = {
        "name": "X",
        "settings": {
            "secrets": {"OPENAI_API_KEY": "sk-one", "FINE": "$FINE", "EMPTY": ""},
            "TWITTER_PASSWORD": "hunter2",
            "maxTokens": "4096",
            "voice": {"model": "en_US"},
        },
        "secrets": {"ANTHROPIC_API_KEY": "sk-two"},
        "clientConfig": {"discord": {"botToken": "tok-three", "allowedChannels": ["general"]}},
    }

    problems = find_secret_problems(data)

    assert [p.path for p in problems] == [
        "settings.secrets.OPENAI_API_KEY",
        "settings.TWITTER_PASSWORD",
        "secrets.ANTHROPIC_API_KEY",
        "clientConfig.discord.botToken",
    ]
    text = "\n".join(str(p) for p in problems)
    for literal in ("sk-one", "hunter2", "sk-two", "tok-three"):
        assert literal not in text
    assert 'write "$OPENAI_API_KEY" here' in problems[0].message
    assert '"$DISCORD_BOT_TOKEN"' in problems[3].message


def test_secrets_ref_resolves_from_injected_environment() -> None:
    assert SecretRef("A", "B").resolve({"B": "value"}) == "value"
    assert SecretRef("A", "B").resolve({"B": ""}) is None
    assert SecretRef("A", None).resolve({"A": "same-name"}) == "same-name"
