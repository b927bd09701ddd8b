"""Loading files: every problem reported at once, with paths in the file's spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carrier.character import (
    find_character_files,
    load_character,
    load_character_text,
    parse_character,
    validate_paths,
)
from carrier.errors import CharacterError

THREE_MISTAKES = """\
name: Broken
bio: 42
settings:
  secrets:
    OPENAI_API_KEY: sk-live-do-not-leak-123
messageExamples:
  - - user: "{{user1}}"
      content:
        text: hello
    - user: Broken
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_loader_reports_every_problem_with_its_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.yaml", THREE_MISTAKES)

    with pytest.raises(CharacterError) as info:
        load_character(path)

    error = info.value
    assert error.file == str(path)
    assert [p.path for p in error.problems] == [
        "bio",
        "settings.secrets.OPENAI_API_KEY",
        "messageExamples.0.1.content",
    ]
    assert error.problems[0].message == "expected a string or a list of strings, got 42"
    assert "required" in error.problems[2].message
    assert "literal secret is not allowed" in error.problems[1].message
    assert "sk-live-do-not-leak-123" not in str(error)
    assert str(path) in str(error)


def test_loader_paths_follow_the_file_spelling() -> None:
    data = {
        "name": "Snake",
        "message_examples": [[{"name": "{{name1}}", "content": {"text": 42}}]],
        "post_examples": [1],
        "knowledge": [{"shared": True}, {"path": 7}],
    }

    with pytest.raises(CharacterError) as info:
        parse_character(data)

    assert [(p.path, p.message) for p in info.value.problems] == [
        ("message_examples.0.0.content.text", "expected a string, got 42"),
        ("post_examples.0", "expected a string, got 1"),
        (
            "knowledge.0",
            'expected a string, {"path": ..., "shared": ...} or '
            '{"directory": ..., "shared": ...}, got an object',
        ),
        ("knowledge.1.path", "expected a string, got 7"),
    ]


def test_loader_missing_speaker_and_name_are_reported() -> None:
    with pytest.raises(CharacterError) as info:
        parse_character({"bio": "x", "messageExamples": [[{"content": {"text": "hi"}}]]})

    problems = {p.path: p.message for p in info.value.problems}
    assert list(problems) == ["messageExamples.0.0.name", "name"]
    assert "`user` in v0.1 files" in problems["messageExamples.0.0.name"]
    assert problems["name"] == "required field is missing"


def test_loader_invalid_yaml_has_line_number() -> None:
    with pytest.raises(CharacterError) as info:
        load_character_text("name: X\nbio:\n  - ok\nlore: [a, b\n", fmt="yaml", source="x.yaml")

    (problem,) = info.value.problems
    assert problem.path == ""
    assert problem.message.startswith("invalid YAML at line 5")
    assert info.value.file == "x.yaml"


def test_loader_invalid_json_has_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.json", '{\n  "name": "X",\n  "bio": [1,]\n}\n')

    with pytest.raises(CharacterError) as info:
        load_character(path)

    (problem,) = info.value.problems
    assert problem.message.startswith("invalid JSON at line 3, column")


def test_loader_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"

    with pytest.raises(CharacterError) as info:
        load_character(path)

    assert info.value.file == str(path)
    assert str(path) in str(info.value)
    assert info.value.problems[0].message == "file not found"


def test_loader_top_level_must_be_an_object() -> None:
    with pytest.raises(CharacterError) as info:
        load_character_text("- a\n- b\n", fmt="yaml")

    assert "got a list" in info.value.problems[0].message


def test_loader_unsupported_extension_is_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.txt", "name: X")

    with pytest.raises(CharacterError, match="unsupported file type"):
        load_character(path)


def test_loader_yaml_and_json_give_the_same_character(tmp_path: Path) -> None:
    data = {"name": "Twin", "bio": "One line.", "style": {"all": "terse"}}
    as_json = load_character(_write(tmp_path, "t.json", json.dumps(data)))
    as_yaml = load_character(
        _write(tmp_path, "t.yml", "name: Twin\nbio: One line.\nstyle: {all: terse}\n")
    )

    assert as_json == as_yaml
    assert as_json.bio == ["One line."]
    assert as_json.style.all == ["terse"]
    assert as_yaml.source and as_yaml.source.endswith("t.yml")


def test_loader_find_character_files_lists_supported_types(tmp_path: Path) -> None:
    for name in ("a.json", "b.yaml", "c.yml", "d.png", "e.txt", ".hidden.json"):
        _write(tmp_path, name, "")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", "f.json", "")

    assert [p.name for p in find_character_files(tmp_path)] == [
        "a.json",
        "b.yaml",
        "c.yml",
        "d.png",
    ]
    assert "f.json" in [p.name for p in find_character_files(tmp_path, recursive=True)]


def test_loader_validate_paths_reports_per_file(tmp_path: Path) -> None:
    good = _write(tmp_path, "good.yaml", "name: Good\n")
    bad = _write(tmp_path, "bad.yaml", "name: Bad\nbio: 42\n")
    empty = tmp_path / "empty"
    empty.mkdir()

    results = validate_paths([tmp_path, empty, tmp_path / "missing.json"])

    assert results[str(good)] == []
    assert [p.path for p in results[str(bad)]] == ["bio"]
    assert "no character files" in results[str(empty)][0].message
    assert results[str(tmp_path / "missing.json")][0].message == "no such file or directory"
