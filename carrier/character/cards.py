"""Character Card V2/V3 (``chara_card_v2`` / ``chara_card_v3``) ↔ ElizaOS character data.

The card's fields live under ``data``. Mapping onto a Character: ``description`` → ``bio`` (one
entry per sentence), ``personality`` → ``adjectives`` (its short comma-separated traits) and
``style.all``, ``scenario`` → ``system`` and ``lore``, ``system_prompt`` → ``system``,
``first_mes`` / ``alternate_greetings`` / ``mes_example`` → ``messageExamples``, ``tags`` →
``topics``, ``character_book.entries`` → ``lorebook``, ``post_history_instructions`` →
``settings.postHistoryInstructions``. Everything else (creator, creator_notes,
character_version, extensions, ...) is kept under the extra key ``card``. ``{{char}}`` becomes
the name and ``{{user}}`` becomes ``{{user1}}``, the ElizaOS placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from carrier.character._cardtext import fill, greeting_prompt, parse_mes_example, sentences, traits
from carrier.character._describe import describe
from carrier.character.png import encode_card, write_png_chunks
from carrier.errors import Problem

if TYPE_CHECKING:
    from carrier.character.model import Character

__all__ = [
    "CARD_SPECS",
    "card_to_character_data",
    "card_version",
    "character_to_card",
    "write_card_png",
]

CARD_SPECS = {"chara_card_v2": 2, "chara_card_v3": 3}
_MAPPED = {
    "name", "description", "personality", "scenario", "first_mes", "mes_example",
    "alternate_greetings", "system_prompt", "post_history_instructions", "character_book", "tags",
}  # fmt: skip
_ENTRY_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("enabled", "enabled", bool),
    ("case_sensitive", "caseSensitive", bool),
    ("constant", "constant", bool),
    ("insertion_order", "insertionOrder", int),
    ("priority", "priority", int),
    ("name", "name", str),
)


def card_version(data: object) -> int | None:
    """2 or 3 for a V2/V3 card, 1 for a bare V1 card (top-level ``first_mes`` and
    ``mes_example``, no ElizaOS keys), ``None`` when ``data`` is not a card."""
    if not isinstance(data, Mapping):
        return None
    spec = data.get("spec")
    if isinstance(spec, str) and spec in CARD_SPECS:
        return CARD_SPECS[spec]
    eliza = ("bio", "messageExamples", "message_examples")
    if spec is None and {"name", "first_mes", "mes_example"} <= set(data):
        return None if any(k in data for k in eliza) else 1
    return None


class _Fields:
    """Typed reads of a card's fields, collecting a Problem for each wrong type."""

    def __init__(self, fields: Mapping[str, Any], prefix: str) -> None:
        self.fields, self.prefix, self.problems = fields, prefix, list[Problem]()

    def text(self, key: str) -> str:
        value = self.fields.get(key)
        if value is None or isinstance(value, str):
            return value or ""
        self.problems.append(
            Problem(self.prefix + key, f"expected a string, got {describe(value)}")
        )
        return ""

    def texts(self, key: str) -> list[str]:
        value = self.fields.get(key)
        if value is None:
            return []
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        self.problems.append(
            Problem(self.prefix + key, f"expected a list of strings, got {describe(value)}")
        )
        return []


def card_to_character_data(card: Mapping[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """ElizaOS character data (camelCase) from a card, and the problems found in the card."""
    version = card_version(card)
    fields: object = card.get("data") if version in (2, 3) else card
    prefix = "data." if version in (2, 3) else ""
    if not isinstance(fields, Mapping):
        return {}, [
            Problem("data", f"expected an object with the card's fields, got {describe(fields)}")
        ]
    r = _Fields(fields, prefix)
    name = r.text("name").strip()
    if not name:
        r.problems.append(
            Problem(prefix + "name", "expected the character's name, a non-empty string")
        )
    char = r.text("nickname").strip() or name

    out: dict[str, Any] = {"name": name}
    if bio := sentences(fill(r.text("description"), char)):
        out["bio"] = bio
    if personality := fill(r.text("personality"), char).strip():
        out["adjectives"] = traits(personality)
        out["style"] = {"all": [personality]}
    scenario = fill(r.text("scenario"), char).strip()
    system_prompt = fill(r.text("system_prompt").replace("{{original}}", ""), char).strip()
    if system := "\n\n".join(p for p in (system_prompt, scenario and f"Scenario: {scenario}") if p):
        out["system"] = system
    if scenario:
        out["lore"] = sentences(scenario)

    greetings = [g for g in (r.text("first_mes"), *r.texts("alternate_greetings")) if g.strip()]
    examples = [
        [
            {"name": "{{user1}}", "content": {"text": greeting_prompt(i)}},
            {"name": name, "content": {"text": fill(g, char).strip()}},
        ]
        for i, g in enumerate(greetings)
    ]
    examples += parse_mes_example(r.text("mes_example"), name=name, nickname=char)
    if examples:
        out["messageExamples"] = examples
    if tags := [t.strip() for t in r.texts("tags") if t.strip()]:
        out["topics"] = tags
    if phi := fill(r.text("post_history_instructions").replace("{{original}}", ""), char).strip():
        out["settings"] = {"postHistoryInstructions": phi}

    entries, book_meta = _lorebook(fields.get("character_book"), prefix + "character_book", char, r)
    if entries:
        out["lorebook"] = entries
    meta: dict[str, Any] = {"spec": card.get("spec") or "chara_card_v1"}
    if card.get("spec_version") is not None:
        meta["specVersion"] = card.get("spec_version")
    meta.update({k: v for k, v in fields.items() if k not in _MAPPED})
    if book_meta:
        meta["character_book"] = book_meta
    out["card"] = meta
    return out, r.problems


def _lorebook(
    book: object, path: str, char: str, r: _Fields
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if book is None:
        return [], {}
    if not isinstance(book, Mapping):
        r.problems.append(Problem(path, f"expected an object with `entries`, got {describe(book)}"))
        return [], {}
    raw = book.get("entries") or []
    if not isinstance(raw, list):
        r.problems.append(Problem(path + ".entries", f"expected a list, got {describe(raw)}"))
        raw = []
    entries = []
    for i, e in enumerate(raw):
        where = f"{path}.entries.{i}"
        if not isinstance(e, Mapping):
            r.problems.append(Problem(where, f"expected an object, got {describe(e)}"))
            continue
        keys = [e["keys"]] if isinstance(e.get("keys"), str) else e.get("keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            r.problems.append(Problem(where + ".keys", "expected a list of strings"))
            continue
        if not isinstance(e.get("content"), str):
            r.problems.append(
                Problem(where + ".content", f"expected a string, got {describe(e.get('content'))}")
            )
            continue
        entry: dict[str, Any] = {"keys": keys, "content": fill(e["content"], char)}
        for src, dst, kind in _ENTRY_FIELDS:
            value = e.get(src)
            if value is None:
                continue
            if kind is int and isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                r.problems.append(
                    Problem(f"{where}.{src}", f"expected a {kind.__name__}, got {describe(value)}")
                )
                continue
            entry[dst] = value
        handled = {"keys", "content", *(src for src, _, _ in _ENTRY_FIELDS)}
        entry.update({k: v for k, v in e.items() if k not in handled})
        entries.append(entry)
    return entries, {k: v for k, v in book.items() if k != "entries"}


def character_to_card(character: Character, *, version: Literal[2, 3] = 2) -> dict[str, Any]:
    """A Character Card (V2 or V3) for ``character``; an imported card's metadata comes back."""
    extra = character.model_extra or {}
    meta = dict(extra["card"]) if isinstance(extra.get("card"), Mapping) else {}
    name = character.name
    greetings: list[str] = []
    blocks: list[str] = []
    for conversation in character.message_examples:
        texts = [(m.speaker, m.content.text) for m in conversation]
        if len(texts) == 2 and texts[0][1] in _GREETINGS and texts[1][0] == name:
            greetings.append(_unfill(texts[1][1]))
            continue
        lines = [f"{'{{char}}' if s == name else '{{user}}'}: {_unfill(t)}" for s, t in texts]
        blocks.append("<START>\n" + "\n".join(lines))
    phi = (character.settings.model_extra or {}).get("postHistoryInstructions")
    system = character.system or ""
    if meta:  # imported: the scenario was appended to the system prompt, and goes back on its own
        system = _SCENARIO_TAIL.sub("", system)
    data: dict[str, Any] = {
        "name": name,
        "description": _unfill(" ".join(character.bio) or character.description or ""),
        "personality": ", ".join(character.adjectives),
        "scenario": _unfill(" ".join(character.lore)),
        "first_mes": greetings[0] if greetings else "",
        "mes_example": "\n".join(blocks),
        "creator_notes": meta.pop("creator_notes", ""),
        "system_prompt": _unfill(system),
        "post_history_instructions": _unfill(phi) if isinstance(phi, str) else "",
        "alternate_greetings": greetings[1:],
        "tags": list(character.topics),
        "creator": meta.pop("creator", ""),
        "character_version": meta.pop("character_version", ""),
        "extensions": meta.pop("extensions", {}),
    }
    book = meta.pop("character_book", {})
    if character.lorebook:
        data["character_book"] = {
            **(book if isinstance(book, Mapping) else {}),
            "entries": [
                _card_entry(e.model_dump(by_alias=True), i)
                for i, e in enumerate(character.lorebook)
            ],
        }
    if version == 3:
        data["group_only_greetings"] = meta.pop("group_only_greetings", [])
        data.update({k: v for k, v in meta.items() if k not in ("spec", "specVersion")})
    spec, spec_version = ("chara_card_v3", "3.0") if version == 3 else ("chara_card_v2", "2.0")
    return {"spec": spec, "spec_version": spec_version, "data": data}


_GREETINGS = {greeting_prompt(i) for i in range(8)}
_SCENARIO_TAIL = re.compile(r"(?:\A|\n\n)Scenario: .*\Z", re.DOTALL)


def _unfill(text: str) -> str:
    return re.sub(r"\{\{user1\}\}", "{{user}}", text)


def _card_entry(entry: dict[str, Any], index: int) -> dict[str, Any]:
    out = {
        "keys": entry.pop("keys", []),
        "content": entry.pop("content", ""),
        "extensions": entry.pop("extensions", {}),
        "enabled": entry.pop("enabled", True),
        "insertion_order": entry.pop("insertionOrder", None) or index,
        "case_sensitive": entry.pop("caseSensitive", False),
    }
    out.update({k: v for k, v in entry.items() if v is not None})
    return out


def _as_version(card: Mapping[str, Any], version: int) -> dict[str, Any]:
    data = card.get("data") if card_version(card) in (2, 3) else card
    spec, spec_version = ("chara_card_v3", "3.0") if version == 3 else ("chara_card_v2", "2.0")
    return {"spec": spec, "spec_version": spec_version, "data": data}


def write_card_png(
    character_or_card: Character | Mapping[str, Any],
    path: str | Path,
    *,
    version: Literal[2, 3] = 2,
    image: str | Path | None = None,
    v2_fallback: bool = True,
) -> Path:
    """Write a Character Card PNG: the card base64-encoded in a ``chara`` (V2) or ``ccv3`` (V3)
    ``tEXt`` chunk. A V3 card also gets a V2 ``chara`` chunk for older readers unless
    ``v2_fallback`` is false. ``image`` is the picture to carry it (default: a plain square)."""
    if isinstance(character_or_card, Mapping):
        card = _as_version(character_or_card, version)
    else:
        card = character_to_card(character_or_card, version=version)
    chunks = {"chara": encode_card(_as_version(card, 2))} if version == 2 or v2_fallback else {}
    if version == 3:
        chunks["ccv3"] = encode_card(card)
    return write_png_chunks(path, chunks, image=image)
