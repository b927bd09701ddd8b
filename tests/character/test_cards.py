"""Character Card V2/V3 import (JSON and PNG) and export."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, PngImagePlugin

from carrier.character import (
    dump_character,
    import_card,
    load_character,
    parse_character,
    write_card_png,
)
from carrier.character.cards import character_to_card
from carrier.errors import CharacterError


def v2_card(name: str = "Mira") -> dict[str, Any]:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": (
                "{{char}} keeps the lighthouse on a windy island. "
                "She talks to {{user}} like an old friend.\n\nShe collects sea glass."
            ),
            "personality": "warm, dry-humored, patient and observant",
            "scenario": "{{user}} arrives at the lighthouse during a storm.",
            "first_mes": "*opens the door* Come in, before the wind takes you.",
            "mes_example": (
                "<START>\n{{user}}: What's that light?\n"
                "{{char}}: The lamp. Forty years without a night off.\nIt is proud of that.\n"
                "<START>\n{{user}}: Are you lonely?\n{{char}}: The gulls disagree."
            ),
            "creator_notes": "Gentle slice of life.",
            "system_prompt": "{{original}} Stay in character as {{char}}.",
            "post_history_instructions": "Keep replies under 80 words.",
            "alternate_greetings": ["Storm's early tonight, {{user}}."],
            "tags": ["cozy", "sea"],
            "creator": "tester",
            "character_version": "1.2",
            "extensions": {"talkativeness": "0.5"},
            "character_book": {
                "name": "Isle",
                "entries": [
                    {
                        "keys": ["lamp", "light"],
                        "content": "{{char}}'s lamp is a Fresnel lens.",
                        "extensions": {},
                        "enabled": True,
                        "insertion_order": 10,
                        "case_sensitive": False,
                        "comment": "the lamp",
                    },
                    {
                        "keys": ["Gull"],
                        "content": "The gull is called Admiral.",
                        "extensions": {},
                        "enabled": False,
                        "insertion_order": 20,
                        "case_sensitive": True,
                    },
                ],
            },
        },
    }


def v3_card(name: str = "Mira") -> dict[str, Any]:
    card = v2_card(name)
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    card["data"].update(
        nickname="Mimi", group_only_greetings=[], assets=[], creation_date=1700000000
    )
    return card


def _png_with(path: Path, chunks: list[tuple[str, dict[str, Any], str]]) -> Path:
    """A PNG carrying each (keyword, card, kind) as a tEXt, zTXt or iTXt chunk, made with Pillow."""
    info = PngImagePlugin.PngInfo()
    for key, card, kind in chunks:
        text = base64.b64encode(json.dumps(card).encode()).decode()
        if kind == "itxt":
            info.add_itxt(key, text, zip=True)
        else:
            info.add_text(key, text, zip=kind == "ztxt")
    Image.new("RGB", (8, 8), "white").save(path, format="PNG", pnginfo=info)
    return path


def test_cards_v2_json_maps_every_part(tmp_path: Path) -> None:
    path = tmp_path / "mira.json"
    path.write_text(json.dumps(v2_card()), encoding="utf-8")

    mira = import_card(path)

    assert mira.name == "Mira"
    assert mira.bio == [
        "Mira keeps the lighthouse on a windy island.",
        "She talks to {{user1}} like an old friend.",
        "She collects sea glass.",
    ]
    assert mira.adjectives == ["warm", "dry-humored", "patient", "observant"]
    assert mira.style.all == ["warm, dry-humored, patient and observant"]
    scenario = "{{user1}} arrives at the lighthouse during a storm."
    assert mira.system == f"Stay in character as Mira.\n\nScenario: {scenario}"
    assert mira.lore == [scenario]
    assert mira.topics == ["cozy", "sea"]
    conversations = [[(m.speaker, m.content.text) for m in c] for c in mira.message_examples]
    assert conversations == [
        [("{{user1}}", "Hello!"), ("Mira", "*opens the door* Come in, before the wind takes you.")],
        [("{{user1}}", "Hi there!"), ("Mira", "Storm's early tonight, {{user1}}.")],
        [
            ("{{user1}}", "What's that light?"),
            ("Mira", "The lamp. Forty years without a night off.\nIt is proud of that."),
        ],
        [("{{user1}}", "Are you lonely?"), ("Mira", "The gulls disagree.")],
    ]
    lamp, gull = mira.lorebook
    assert (lamp.keys, lamp.content, lamp.enabled, lamp.insertion_order) == (
        ["lamp", "light"],
        "Mira's lamp is a Fresnel lens.",
        True,
        10,
    )
    assert (gull.enabled, gull.case_sensitive) == (False, True)
    assert (lamp.model_extra or {})["comment"] == "the lamp"
    assert (mira.settings.model_extra or {})[
        "postHistoryInstructions"
    ] == "Keep replies under 80 words."
    card = (mira.model_extra or {})["card"]
    assert card["creator"] == "tester"
    assert card["creator_notes"] == "Gentle slice of life."
    assert card["character_version"] == "1.2"
    assert card["spec"] == "chara_card_v2"


def test_cards_v3_json_uses_nickname_for_char(tmp_path: Path) -> None:
    path = tmp_path / "mira.json"  # a card is recognized by its `spec`, not by its file name
    path.write_text(json.dumps(v3_card()), encoding="utf-8")

    mira = load_character(path)

    assert mira.name == "Mira"
    assert mira.bio[0] == "Mimi keeps the lighthouse on a windy island."
    assert mira.message_examples[2][1].speaker == "Mira"
    assert (mira.model_extra or {})["card"]["nickname"] == "Mimi"
    assert len(mira.lorebook) == 2


def test_cards_v2_png_loads_like_the_json(tmp_path: Path) -> None:
    path = write_card_png(v2_card(), tmp_path / "mira.png", version=2)

    assert load_character(path) == parse_character(v2_card())
    assert import_card(path).lorebook[0].keys == ["lamp", "light"]


def test_cards_v3_png_from_a_character_round_trips(tmp_path: Path) -> None:
    original = parse_character(v2_card())

    path = write_card_png(original, tmp_path / "mira.png", version=3)
    again = load_character(path)

    assert again.name == "Mira"
    assert again.topics == original.topics
    assert [e.keys for e in again.lorebook] == [e.keys for e in original.lorebook]
    texts = [[m.content.text for m in c] for c in again.message_examples]
    assert texts == [[m.content.text for m in c] for c in original.message_examples]
    assert (again.model_extra or {})["card"]["spec"] == "chara_card_v3"


@pytest.mark.parametrize("kind", ["text", "ztxt", "itxt"])
def test_cards_png_with_both_chunks_prefers_v3(tmp_path: Path, kind: str) -> None:
    path = _png_with(
        tmp_path / "both.png",
        [("ccv3", v3_card("NewMira"), kind), ("chara", v2_card("OldMira"), kind)],
    )

    assert load_character(path).name == "NewMira"


def test_cards_png_without_a_card_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "plain.png"
    Image.new("RGB", (4, 4)).save(path, format="PNG")
    not_png = tmp_path / "fake.png"
    not_png.write_bytes(b"GIF89a....")

    with pytest.raises(CharacterError, match="no character card"):
        load_character(path)
    with pytest.raises(CharacterError, match="not a PNG"):
        load_character(not_png)


def test_cards_problems_use_card_paths() -> None:
    card = v2_card()
    card["data"]["name"] = ""
    card["data"]["tags"] = "cozy"
    card["data"]["character_book"]["entries"][0]["keys"] = 3

    with pytest.raises(CharacterError) as info:
        parse_character(card, source="bad.json")

    assert [p.path for p in info.value.problems] == [
        "data.name",
        "data.tags",
        "data.character_book.entries.0.keys",
    ]


def test_cards_v1_card_without_spec_is_detected() -> None:
    v1 = {k: v for k, v in v2_card()["data"].items() if k != "character_book"}

    mira = parse_character(v1)

    assert mira.name == "Mira"
    assert (mira.model_extra or {})["card"]["spec"] == "chara_card_v1"


def test_cards_import_refuses_a_plain_character(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text('{"name": "Plain"}', encoding="utf-8")

    with pytest.raises(CharacterError, match="not a Character Card"):
        import_card(path)


def test_cards_imported_character_dumps_and_loads_back_equal(tmp_path: Path) -> None:
    mira = parse_character(v3_card())

    assert load_character(dump_character(mira, tmp_path / "mira.yaml")) == mira


def test_cards_export_restores_card_fields() -> None:
    card = character_to_card(parse_character(v2_card()), version=2)

    data = card["data"]
    assert card["spec"] == "chara_card_v2"
    assert data["system_prompt"] == "Stay in character as Mira."
    assert data["first_mes"] == "*opens the door* Come in, before the wind takes you."
    assert data["alternate_greetings"] == ["Storm's early tonight, {{user}}."]
    assert data["mes_example"].count("<START>") == 2
    assert data["creator"] == "tester"
    assert data["character_book"]["entries"][0]["insertion_order"] == 10
