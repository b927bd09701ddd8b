"""The Character model: normalization, unknown keys, round trips, ids, settings and secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from carrier.character import (
    Character,
    KnowledgeDirectory,
    LoreEntry,
    dump_character,
    load_character,
    parse_character,
)
from carrier.types import stable_id

RICH = {
    "name": "Rich",
    "id": "4a1f2b3c-0000-4000-8000-000000000001",
    "bio": "A single bio line.",
    "lore": ["One", "Two"],
    "knowledge": ["fact", {"path": "notes.md"}, {"directory": "docs", "shared": True}],
    "messageExamples": [
        [
            {"user": "{{user1}}", "content": {"text": "hi", "attachments": []}},
            {"user": "Rich", "content": {"text": "hello", "action": "CONTINUE"}},
        ],
        [
            {"name": "{{name1}}", "content": {"text": "yo"}},
            {"name": "Rich", "content": {"text": "hey", "actions": ["REPLY"]}, "extraKey": 1},
        ],
    ],
    "postExamples": ["post"],
    "style": {"all": "calm", "chat": ["short"], "post": []},
    "settings": {
        "model": "openai/gpt-4o-mini",
        "modelFallbacks": ["anthropic/claude-3-5-haiku-latest"],
        "temperature": 0.5,
        "maxTokens": 300,
        "secrets": {"OPENAI_API_KEY": "$OPENAI_KEY_FOR_RICH"},
        "voice": {"model": "en_US"},
        "customSetting": {"nested": True},
    },
    "secrets": {"DISCORD_API_TOKEN": {"env": "RICH_DISCORD"}},
    "clientConfig": {"discord": {"allowedChannels": ["general"]}},
    "templates": {"messageHandlerTemplate": "{{agentName}} says hi"},
    "lorebook": [{"keys": ["dragon"], "content": "Dragons are real.", "caseSensitive": True}],
    "twitterProfile": {"handle": "@rich"},
    "people": ["someone"],
}


def test_model_normalizes_strings_to_lists() -> None:
    character = parse_character(RICH)

    assert character.bio == ["A single bio line."]
    assert character.style.all == ["calm"]
    assert character.knowledge[2] == KnowledgeDirectory(directory="docs", shared=True)


def test_model_examples_have_one_speaker_attribute() -> None:
    character = parse_character(RICH)

    v0, v1 = character.message_examples
    assert [m.speaker for m in v0] == ["{{user1}}", "Rich"]
    assert [m.speaker for m in v1] == ["{{name1}}", "Rich"]
    assert v0[1].content.all_actions == ["CONTINUE"]
    assert v1[1].content.all_actions == ["REPLY"]


def test_model_keeps_unknown_keys() -> None:
    character = parse_character(RICH)

    extra = character.model_extra or {}
    assert extra["twitterProfile"] == {"handle": "@rich"}
    assert extra["people"] == ["someone"]
    assert (character.settings.model_extra or {})["customSetting"] == {"nested": True}
    assert (character.message_examples[1][1].model_extra or {})["extraKey"] == 1


def test_model_round_trip_through_json_gives_back_the_same_data() -> None:
    character = parse_character(RICH)

    dumped = character.model_dump(by_alias=True, exclude_none=True)
    again = parse_character(json.loads(json.dumps(dumped)))

    assert again == character
    assert dumped["messageExamples"][0][0]["user"] == "{{user1}}"
    assert dumped["messageExamples"][1][0]["name"] == "{{name1}}"
    assert dumped["settings"]["secrets"] == {"OPENAI_API_KEY": "$OPENAI_KEY_FOR_RICH"}
    assert dumped["lorebook"][0]["caseSensitive"] is True
    assert dumped["twitterProfile"] == {"handle": "@rich"}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_model_dump_character_loads_back_equal(tmp_path: Path, suffix: str) -> None:
    character = parse_character(RICH)

    path = dump_character(character, tmp_path / f"rich{suffix}")

    assert load_character(path) == character
    assert "$OPENAI_KEY_FOR_RICH" in path.read_text(encoding="utf-8")


def test_model_agent_id_is_the_id_or_derived_from_the_name() -> None:
    assert parse_character(RICH).agent_id == RICH["id"]
    unnamed = Character(name="Nameless")
    assert unnamed.agent_id == stable_id("agent", "Nameless")
    assert Character(name="Nameless").agent_id == unnamed.agent_id


def test_model_settings_are_exposed() -> None:
    settings = parse_character(RICH).model_settings

    assert settings.model == "openai/gpt-4o-mini"
    assert settings.model_fallbacks == ["anthropic/claude-3-5-haiku-latest"]
    assert settings.temperature == 0.5
    assert settings.max_tokens == 300
    empty = Character(name="E").model_settings
    assert (empty.model, empty.model_fallbacks, empty.temperature, empty.max_tokens) == (
        None,
        [],
        None,
        None,
    )


def test_model_settings_accept_snake_case_keys() -> None:
    character = Character.model_validate(
        {"name": "S", "settings": {"model_fallbacks": "a/b", "max_tokens": 9}}
    )

    assert character.model_settings.model_fallbacks == ["a/b"]
    assert character.model_settings.max_tokens == 9


def test_model_secrets_merge_and_resolve_from_injected_environ() -> None:
    character = parse_character(RICH)

    refs = character.secret_refs()
    assert refs["OPENAI_API_KEY"].env == "OPENAI_KEY_FOR_RICH"
    assert refs["DISCORD_API_TOKEN"].env == "RICH_DISCORD"
    environ = {"OPENAI_KEY_FOR_RICH": "k1", "RICH_DISCORD": "t1", "OTHER": "o"}
    assert character.resolve_secret("OPENAI_API_KEY", environ) == "k1"
    assert character.resolve_secret("DISCORD_API_TOKEN", environ) == "t1"
    assert character.resolve_secret("OTHER", environ) == "o"
    assert character.resolve_secret("MISSING", environ) is None


def test_model_direct_construction_refuses_literal_secrets() -> None:
    with pytest.raises(ValidationError) as info:
        Character(name="Leaky", secrets={"OPENAI_API_KEY": "sk-direct-999"})

    assert "secrets.OPENAI_API_KEY" in str(info.value)
    assert "sk-direct-999" not in str(info.value)


def test_model_blank_name_is_refused() -> None:
    with pytest.raises(ValidationError, match="non-empty name"):
        Character(name="  ")


def test_model_source_does_not_affect_equality(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: S\n", encoding="utf-8")

    loaded = load_character(path)

    assert loaded.source == str(path)
    assert Character(name="S").source is None
    assert loaded == Character(name="S")


@pytest.mark.parametrize(
    ("entry", "text", "hit"),
    [
        ({"keys": ["dragon"], "content": "c"}, "A DRAGON appears", True),
        ({"keys": ["dragon"], "content": "c", "caseSensitive": True}, "A DRAGON appears", False),
        ({"keys": ["cat"], "content": "c"}, "concatenate", False),
        ({"keys": ["cat"], "content": "c", "enabled": False}, "a cat", False),
        ({"keys": [], "content": "c", "constant": True}, "anything", True),
    ],
)
def test_model_lore_entry_matches_keys(entry: dict[str, object], text: str, hit: bool) -> None:
    assert LoreEntry.model_validate(entry).matches(text) is hit
