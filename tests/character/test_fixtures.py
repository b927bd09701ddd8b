"""Real ElizaOS character files (v0.1.9 and v1) load, keep their data and round-trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carrier.character import Character, KnowledgeFile, load_character, parse_character
from tests.character.paths import ELIZA_FIXTURES, eliza_fixture_files

_FILES = eliza_fixture_files()
needs_fixtures = pytest.mark.skipif(
    not _FILES, reason=f"ElizaOS fixtures not found at {ELIZA_FIXTURES} (../shared beside the repo)"
)


@needs_fixtures
@pytest.mark.parametrize("path", _FILES or [None], ids=lambda p: p.name if p else "absent")
def test_eliza_fixture_loads_and_round_trips(path: Path) -> None:
    character = load_character(path)
    raw = json.loads(path.read_text(encoding="utf-8"))

    assert character.name == raw["name"]
    assert character.source == str(path)
    # Every key of the file survives a dump, unknown ones included.
    dumped = character.model_dump(by_alias=True, exclude_none=True)
    assert set(raw) <= set(dumped)
    assert parse_character(json.loads(json.dumps(dumped))) == character


@needs_fixtures
def test_eliza_fixture_c3po_values_are_mapped() -> None:
    c3po = load_character(ELIZA_FIXTURES / "v0.1.9" / "c3po.character.json")

    assert c3po.name == "C-3PO"
    assert c3po.model_provider == "anthropic"
    assert len(c3po.bio) == 4
    assert len(c3po.lore) == 4
    assert c3po.knowledge[0] == "Protocol and etiquette"
    first = c3po.message_examples[0]
    assert [m.speaker for m in first] == ["{{user1}}", "C-3PO", "{{user1}}", "C-3PO"]
    assert first[0].content.text == "Can you help me with this task?"
    assert c3po.settings.voice == {"model": "en_GB-alan-medium"}
    assert c3po.style.chat[0] == "Polite"
    assert (c3po.model_extra or {})["twitterSpaces"]["maxSpeakers"] == 2
    dumped = c3po.model_dump(by_alias=True, exclude_none=True)
    assert dumped["messageExamples"][0][0] == {
        "user": "{{user1}}",
        "content": {"text": "Can you help me with this task?"},
    }


@needs_fixtures
def test_eliza_fixture_v1_examples_use_name_key() -> None:
    ada = load_character(ELIZA_FIXTURES / "v1" / "ada.json")

    assert [m.speaker for m in ada.message_examples[0]] == ["{{name1}}", "Ada"]
    assert ada.plugins[0] == "@elizaos/plugin-sql"
    dumped = ada.model_dump(by_alias=True, exclude_none=True)
    assert set(dumped["messageExamples"][0][1]) == {"name", "content"}


@needs_fixtures
def test_eliza_fixture_empty_secrets_are_allowed_and_unset() -> None:
    simsai = load_character(ELIZA_FIXTURES / "v0.1.9" / "simsai.character.json")

    refs = simsai.secret_refs()
    assert refs["OPENAI_API_KEY"].env is None
    assert "SIMSAI_API_KEY" in refs
    assert simsai.resolve_secret("OPENAI_API_KEY", {}) is None
    assert simsai.resolve_secret("OPENAI_API_KEY", {"OPENAI_API_KEY": "from-env"}) == "from-env"


@needs_fixtures
def test_eliza_fixture_v1_description_is_kept() -> None:
    test_agent = load_character(ELIZA_FIXTURES / "v1" / "test-character.json")

    assert test_agent.description == "A test agent for CLI testing"
    assert test_agent.style.all == ["concise", "technical"]


def test_character_knowledge_items_keep_their_kind() -> None:
    character = Character.model_validate(
        {"name": "K", "knowledge": ["a fact", {"path": "docs/a.md", "shared": True}]}
    )

    assert character.knowledge[0] == "a fact"
    assert character.knowledge[1] == KnowledgeFile(path="docs/a.md", shared=True)
