"""The curated public surface of carrier.character stays honest."""

from __future__ import annotations

import carrier.character as character


def test_exports_every_listed_name_exists() -> None:
    missing = [name for name in character.__all__ if not hasattr(character, name)]

    assert missing == []
    assert {
        "Character",
        "CharacterWarning",
        "check_paths",
        "lint_file",
        "load_character",
        "parse_character",
        "validate_paths",
        "write_card_png",
    } <= set(character.__all__)
