"""Warnings: what loads but will not act as written, each with its field path and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carrier.character import (
    CharacterWarning,
    check_paths,
    lint_character,
    lint_file,
    lint_yaml,
    load_character,
    parse_character,
)
from carrier.character.lint import installed_clients
from carrier.errors import CharacterError


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _by_path(warnings: list[CharacterWarning]) -> dict[str, CharacterWarning]:
    return {w.path: w for w in warnings}


# -- clients ---------------------------------------------------------------------------------------
def test_lint_known_clients_are_the_registered_entry_points() -> None:
    assert {"discord", "instagram"} <= installed_clients()


def test_lint_unknown_client_names_what_carrier_has() -> None:
    character = parse_character(
        {
            "name": "A",
            "clients": ["Discord", "twitter", "discrod"],
            "clientConfig": {"discord": {}, "telegram": {"x": 1}, "Instagram": {"x": 1}},
        }
    )

    warnings = _by_path(lint_character(character, clients={"discord", "instagram"}))

    assert set(warnings) == {
        "clients.1",
        "clients.2",
        "clientConfig.telegram",
        "clientConfig.Instagram",
    }
    assert warnings["clients.1"].kind == "unknown-client"
    assert warnings["clients.1"].message == (
        "'twitter' is not a client Carrier has (it has: discord, instagram); it will be ignored"
    )
    assert "did you mean 'discord'?" in warnings["clients.2"].message
    assert "these options are ignored" in warnings["clientConfig.telegram"].message
    assert "write 'instagram' in lowercase" in warnings["clientConfig.Instagram"].message


# -- modelProvider ---------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", ["openai", "Anthropic", "llama-local", "ollama"])
def test_lint_known_model_provider_is_quiet(provider: str) -> None:
    character = parse_character({"name": "A", "modelProvider": provider})

    assert lint_character(character, clients=()) == []


def test_lint_unknown_model_provider_says_what_happens_instead() -> None:
    character = parse_character({"name": "A", "modelProvider": "opanai"})

    [warning] = lint_character(character, clients=())

    assert (warning.path, warning.kind) == ("modelProvider", "unknown-provider")
    assert "'opanai' is not a model provider Carrier knows (did you mean 'openai'?)" in str(warning)
    assert "settings.model" in warning.message and "CARRIER_MODEL" in warning.message


# -- knowledge paths -------------------------------------------------------------------------------
def test_lint_knowledge_paths_resolve_relative_to_the_character_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "personas" / "docs" / "guide.md", "# Guide\n")
    (tmp_path / "personas" / "notes").mkdir()
    path = _write(
        tmp_path / "personas" / "a.yaml",
        "name: A\n"
        "knowledge:\n"
        "  - a fact as text\n"
        "  - path: docs/guide.md\n"
        "  - directory: notes\n"
        "  - path: docs/missing.md\n"
        "  - directory: gone\n",
    )
    monkeypatch.chdir(tmp_path)  # not the file's folder: paths must not depend on the cwd

    warnings = _by_path(lint_file(path.relative_to(tmp_path), clients=()))

    assert set(warnings) == {"knowledge.3.path", "knowledge.4.directory"}
    assert warnings["knowledge.3.path"].kind == "knowledge-path"
    assert "'docs/missing.md' not found" in warnings["knowledge.3.path"].message
    assert str(tmp_path / "personas" / "gone") in warnings["knowledge.4.directory"].message


# -- settings Carrier does not act on --------------------------------------------------------------
def test_lint_ignored_elizaos_settings_are_named(tmp_path: Path) -> None:
    data = {
        "name": "A",
        "plugins": ["@elizaos/plugin-discord", "@elizaos/plugin-openai", "@elizaos/plugin-sql"],
        "twitterProfile": {"username": "a"},
        "extends": ["base"],
        "people": ["someone"],
        "settings": {
            "voice": {"model": "en_US-male-medium"},
            "ragKnowledge": True,
            "transcription": "deepgram",
            "modelConfig": {"temperature": 0.5, "maxOutputTokens": 200, "maxInputTokens": 9},
            "memoryTools": True,
            "ignore": ["spam"],
            "OPENAI_API_KEY": "$OPENAI_API_KEY",
        },
    }
    character = load_character(_write(tmp_path / "a.json", json.dumps(data)))

    warnings = _by_path(lint_character(character, clients={"discord"}))

    assert set(warnings) == {
        "plugins",
        "twitterProfile",
        "extends",
        "people",
        "settings.voice",
        "settings.ragKnowledge",
        "settings.transcription",
        "settings.modelConfig.maxInputTokens",
    }
    assert all(w.kind == "ignored" for w in warnings.values())
    plugins = warnings["plugins"].message
    assert "does not load ElizaOS plugins" in plugins
    assert "list 'discord' under `clients`" in plugins and "`modelProvider: openai`" in plugins
    assert "no voice" in warnings["settings.voice"].message
    assert "Twitter" in warnings["twitterProfile"].message


def test_lint_empty_or_carrier_written_keys_are_quiet() -> None:
    character = parse_character(
        {
            "name": "A",
            "plugins": [],
            "twitterSpaces": {},
            "card": {"spec": "chara_card_v2"},
            "settings": {"voice": {}, "postHistoryInstructions": "stay in character"},
        }
    )

    assert lint_character(character, clients=()) == []


# -- YAML values cut by a comment ------------------------------------------------------------------
CUT = """\
name: A
bio:
  - warm and quick  # our main trait
  - "quoted #kept"
messageExamples:
  - - name: "{{user1}}"
      content:
        text: when is the jam?
    - name: A
      content:
        text: Hang out in #jam-chat; teams form there.
postExamples:
  - |-
    film day
    #35mm #portra400
settings:
  model: gpt-4o  # cheap
  temperature: 0.8 #warm
clientConfig:
  discord:
    approvalChannel: #mods
    allowedChannels: [general, help] # more later
"""


def test_lint_yaml_reports_values_cut_by_a_comment_with_line_and_path() -> None:
    warnings = _by_path(lint_yaml(CUT))

    assert set(warnings) == {
        "bio.0",
        "messageExamples.0.1.content.text",
        "clientConfig.discord.approvalChannel",
    }
    text = warnings["messageExamples.0.1.content.text"]
    assert text.kind == "cut"
    assert text.message.startswith(
        "line 11: YAML reads '#jam-chat; teams form there.' as a comment"
    )
    assert (
        "the value ends at 'Hang out in'" in text.message
        and "quote the whole value" in text.message
    )
    assert "line 21:" in warnings["clientConfig.discord.approvalChannel"].message
    assert "the value is empty" in warnings["clientConfig.discord.approvalChannel"].message


def test_lint_yaml_matches_snake_case_text_fields_and_ignores_bad_yaml() -> None:
    text = "name: A\nmessage_examples:\n  - - user: A\n      content: {text: see #rules}\n"

    assert [w.path for w in lint_yaml(text)] == []  # a flow mapping: the `}` follows, no comment
    block = "name: A\nmessage_examples:\n  - - user: A\n      content:\n        text: see #rules\n"
    assert [w.path for w in lint_yaml(block)] == ["message_examples.0.0.content.text"]
    assert lint_yaml("name: [unclosed\n") == []


def test_lint_cut_text_is_reported_even_when_the_file_does_not_load(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.yaml", "name: A\nbio:\n  - #introductions is the first stop\n")

    report = check_paths([path], clients=())[str(path)]

    assert [p.path for p in report.problems] == ["bio.0"]
    assert [(w.path, w.kind) for w in report.warnings] == [("bio.0", "cut")]
    with pytest.raises(CharacterError):
        lint_file(path)


def test_lint_check_paths_gives_problems_and_warnings_per_file(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.yaml", "name: Good\nclients: [discord]\n")
    warned = _write(tmp_path / "warned.json", json.dumps({"name": "W", "clients": ["twitter"]}))
    bad = _write(tmp_path / "bad.yaml", "name: Bad\nbio: 42\n")

    results = check_paths([tmp_path, tmp_path / "missing.yaml"])

    assert results[str(good)] == ([], [])
    assert results[str(warned)].problems == []
    assert [w.path for w in results[str(warned)].warnings] == ["clients.0"]
    assert [p.path for p in results[str(bad)].problems] == ["bio"]
    assert (
        results[str(tmp_path / "missing.yaml")].problems[0].message == "no such file or directory"
    )
