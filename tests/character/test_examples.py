"""The example personas in characters/ load and carry what the offline mode needs."""

from __future__ import annotations

import json
import re

import pytest

from carrier.character import Character, check_paths, load_character, validate_paths
from tests.character.paths import CHARACTERS

PERSONAS = ["harbor.yaml", "lumen.yaml", "sage.json"]


def _user_lines(character: Character) -> list[str]:
    return [
        m.content.text.lower()
        for conversation in character.message_examples
        for m in conversation
        if m.speaker != character.name
    ]


@pytest.mark.parametrize("name", PERSONAS)
def test_examples_persona_loads_with_rich_examples(name: str) -> None:
    character = load_character(CHARACTERS / name)

    assert len(character.message_examples) >= 12
    assert character.bio and character.lore and character.topics and character.adjectives
    assert character.style.all and character.style.chat and character.style.post
    assert character.clients
    users = " | ".join(_user_lines(character))
    for needed in (
        r"\bhello\b",
        r"\bhi there\b",
        r"who are you",
        r"what (do you do|can you)",
        "thank",
        r"\bbye\b",
    ):
        assert re.search(needed, users), f"{name}: no example for {needed!r}"
    # Every conversation has the persona answering with text.
    for conversation in character.message_examples:
        assert any(m.speaker == character.name for m in conversation)


def test_examples_harbor_is_a_discord_host() -> None:
    harbor = load_character(CHARACTERS / "harbor.yaml")

    assert harbor.clients == ["discord"]
    assert harbor.secret_refs()["DISCORD_API_TOKEN"].env == "DISCORD_API_TOKEN"
    assert harbor.client_config["discord"]["allowedMentions"]["everyone"] is False
    assert harbor.client_config["discord"]["allowedChannels"]
    assert harbor.lorebook and harbor.model_settings.max_tokens == 400


def test_examples_harbor_texts_are_whole() -> None:
    # Unquoted, "... Hang out in #jam-chat; ..." loads as "... Hang out in": YAML reads the rest
    # as a comment. Every #channel written in Harbor's file must survive loading.
    path = CHARACTERS / "harbor.yaml"
    harbor = load_character(path)

    replies = [m.text for c in harbor.message_examples for m in c if m.speaker == "Harbor"]
    assert [t for t in replies if "#jam-chat" in t] == [
        "The theme drops on the first Friday of the month and you get 72 hours. Hang out in "
        "#jam-chat; teams usually form there a few days before."
    ]
    loaded = json.dumps(harbor.model_dump(by_alias=True), ensure_ascii=False)
    source = path.read_text(encoding="utf-8")
    for channel in sorted(set(re.findall(r"(?<![\w#])#[a-z][a-z-]+", source)) - {"#channel"}):
        assert loaded.count(channel) == source.count(channel), channel


def test_examples_lumen_is_an_instagram_creator() -> None:
    lumen = load_character(CHARACTERS / "lumen.yaml")

    assert lumen.clients == ["instagram"]
    assert len(lumen.post_examples) >= 15
    assert lumen.style.post
    refs = lumen.secret_refs()
    assert refs["INSTAGRAM_ACCESS_TOKEN"].env == "INSTAGRAM_ACCESS_TOKEN"
    assert all(name.startswith("INSTAGRAM_") for name in refs)


def test_examples_sage_is_v1_style_json() -> None:
    sage = load_character(CHARACTERS / "sage.json")

    assert sage.message_examples[0][0].speaker == "{{name1}}"
    assert sage.message_examples[0][0].speaker_key == "name"
    environ = {"SAGE_DISCORD_TOKEN": "sage-token", "DISCORD_API_TOKEN": "other"}
    assert sage.resolve_secret("DISCORD_API_TOKEN", environ) == "sage-token"
    assert sage.resolve_secret("ANTHROPIC_API_KEY", {}) is None


def test_examples_directory_validates_clean() -> None:
    results = validate_paths([CHARACTERS])

    assert {p.split("/")[-1] for p in results} >= set(PERSONAS)
    assert all(problems == [] for problems in results.values()), results
    reports = check_paths([CHARACTERS])
    assert all(report == ([], []) for report in reports.values()), reports
