"""Write a Character back to a file (YAML, or JSON by extension) that loads back equal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml

from carrier.character.model import Character

__all__ = ["character_data", "dump_character", "dumps_character"]


def character_data(character: Character) -> dict[str, Any]:
    """The character as ElizaOS data (camelCase keys), leaving out values equal to defaults."""
    return character.model_dump(mode="json", by_alias=True, exclude_defaults=True)


class _Dumper(yaml.SafeDumper):
    """YAML that reads well: multi-line strings as ``|`` blocks, lists indented under keys."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dumps_character(character: Character, *, fmt: Literal["json", "yaml"] = "yaml") -> str:
    """The character as YAML or JSON text."""
    data = character_data(character)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def dump_character(character: Character, path: str | Path) -> Path:
    """Write ``character`` to ``path``: JSON for ``.json``, YAML otherwise."""
    path = Path(path)
    fmt: Literal["json", "yaml"] = "json" if path.suffix.lower() == ".json" else "yaml"
    path.write_text(dumps_character(character, fmt=fmt), encoding="utf-8")
    return path
