"""A character's own model timeout and turn deadline: read, validated, and accepted by
``carrier validate`` without a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from carrier.character import parse_character
from carrier.character.lint import check_paths
from carrier.errors import CharacterError


def test_model_timeout_and_turn_deadline_are_read() -> None:
    character = parse_character(
        {"name": "Ada", "settings": {"modelTimeout": 12, "turnDeadline": 30.5}}
    )
    ms = character.model_settings
    assert (ms.timeout, ms.deadline) == (12.0, 30.5)
    unset = parse_character({"name": "Bo"}).model_settings
    assert (unset.timeout, unset.deadline) == (None, None)


@pytest.mark.parametrize(
    ("key", "value"), [("modelTimeout", 0), ("turnDeadline", -5), ("modelTimeout", "soon")]
)
def test_bad_deadlines_name_the_field(key: str, value: object) -> None:
    with pytest.raises(CharacterError) as info:
        parse_character({"name": "Ada", "settings": {key: value}}, source="ada.json")
    assert [p.path for p in info.value.problems] == [f"settings.{key}"]


def test_validate_accepts_them_without_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "ada.yaml"
    path.write_text("name: Ada\nsettings:\n  modelTimeout: 15\n  turnDeadline: 40\n")
    [report] = check_paths([path], clients=[]).values()
    assert report.problems == [] and report.warnings == []


def test_settings_give_the_defaults_and_refuse_nonsense() -> None:
    from carrier.settings import explain_settings, load_settings

    default = load_settings({})
    assert (default.model_timeout, default.turn_deadline) == (20.0, 45.0)
    given = load_settings({"CARRIER_MODEL_TIMEOUT": "5", "CARRIER_TURN_DEADLINE": "12.5"})
    assert (given.model_timeout, given.turn_deadline) == (5.0, 12.5)
    with pytest.raises(ValidationError) as info:
        load_settings({"CARRIER_TURN_DEADLINE": "0"})
    assert "CARRIER_TURN_DEADLINE" in str(explain_settings(info.value))
