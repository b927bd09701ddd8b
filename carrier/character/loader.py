"""Load characters from files: ElizaOS JSON (v0.1.x, v1.x), YAML, Character Card JSON and PNG.

Every function raises :class:`~carrier.errors.CharacterError` naming the file and listing every
problem found (bad syntax with line and column, each wrong field with its path in the file's
spelling and what was expected, each literal secret), never just the first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from carrier.character._describe import describe
from carrier.character._problems import in_file_order, problems_from_validation
from carrier.character.cards import card_to_character_data, card_version
from carrier.character.model import Character
from carrier.character.png import PngCardError, card_from_png
from carrier.character.secrets import find_secret_problems
from carrier.errors import CharacterError, Problem

__all__ = [
    "CHARACTER_SUFFIXES",
    "expand_paths",
    "find_character_files",
    "import_card",
    "load_character",
    "load_character_text",
    "parse_character",
    "validate_paths",
]

CHARACTER_SUFFIXES = (".json", ".yaml", ".yml", ".png")
"""File types Carrier reads as characters."""


def parse_character(data: object, *, source: str | None = None) -> Character:
    """Validate already-parsed data (an ElizaOS character or a Character Card) into a Character.

    ``source`` names the file in errors and becomes :attr:`Character.source`.
    """
    if not isinstance(data, Mapping):
        what = f"expected an object (keys and values) at the top level, got {describe(data)}"
        raise CharacterError(source, [Problem("", what)])
    problems: list[Problem] = []
    if card_version(data) is not None:
        if problems := find_secret_problems(data):  # paths in the card's own spelling
            raise CharacterError(source, in_file_order(problems, data))
        data, problems = card_to_character_data(data)
        if problems:
            raise CharacterError(source, problems)
    secret_problems = find_secret_problems(data)
    problems += secret_problems
    character: Character | None = None
    try:
        character = Character.model_validate(data)
    except ValidationError as exc:
        skip = [p.path for p in secret_problems]
        problems += problems_from_validation(exc, data, skip_paths=skip)
    if problems or character is None:
        raise CharacterError(source, in_file_order(problems, data))
    character._source = source
    return character


def load_character_text(
    text: str, *, fmt: Literal["json", "yaml"], source: str | None = None
) -> Character:
    """Parse ``text`` as JSON or YAML and validate it (syntax errors carry line and column)."""
    return parse_character(_parse_text(text, fmt, source), source=source)


def load_character(path: str | Path) -> Character:
    """Load a character file: ``.json`` (ElizaOS or a Character Card), ``.yaml``/``.yml``, or a
    Character Card ``.png``. Knowledge paths in it stay relative to the file (see ``source``)."""
    path = Path(path)
    source = str(path)
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CharacterError(source, [Problem("", "file not found")]) from None
    except IsADirectoryError:
        raise CharacterError(
            source, [Problem("", "is a directory, not a character file")]
        ) from None
    except OSError as exc:
        raise CharacterError(
            source, [Problem("", f"cannot read the file: {exc.strerror}")]
        ) from None
    if suffix == ".png":
        try:
            return parse_character(card_from_png(raw), source=source)
        except PngCardError as exc:
            raise CharacterError(source, [exc.problem]) from None
    if suffix not in CHARACTER_SUFFIXES:
        expected = ", ".join(CHARACTER_SUFFIXES)
        raise CharacterError(
            source, [Problem("", f"unsupported file type; expected one of {expected}")]
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CharacterError(source, [Problem("", f"not UTF-8 text (byte {exc.start})")]) from None
    return load_character_text(text, fmt="json" if suffix == ".json" else "yaml", source=source)


def import_card(path: str | Path) -> Character:
    """Load a Character Card (``.png``, or V1/V2/V3 ``.json``) as a Character; the card's own
    metadata is kept under the extra key ``card``."""
    path = Path(path)
    character = load_character(path)
    if "card" not in (character.model_extra or {}):
        raise CharacterError(
            str(path),
            [
                Problem(
                    "spec",
                    'not a Character Card: expected "spec": "chara_card_v2" or "chara_card_v3"',
                )
            ],
        )
    return character


def find_character_files(directory: str | Path, *, recursive: bool = False) -> list[Path]:
    """The character files (``*.json``, ``*.yaml``, ``*.yml``, ``*.png``) in ``directory``, sorted;
    hidden files are skipped."""
    directory = Path(directory)
    found = directory.rglob("*") if recursive else directory.iterdir()
    return sorted(
        p
        for p in found
        if p.is_file()
        and p.suffix.lower() in CHARACTER_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


def expand_paths(paths: Iterable[str | Path]) -> list[tuple[Path, Problem | None]]:
    """The character files named by ``paths`` (directories expand to their character files,
    searched recursively), each with ``None``; a missing path or a directory without character
    files comes with the Problem to report under its own name."""
    found: list[tuple[Path, Problem | None]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = find_character_files(path, recursive=True)
            if not files:
                expected = ", ".join(f"*{s}" for s in CHARACTER_SUFFIXES)
                found.append(
                    (path, Problem("", f"no character files ({expected}) in this directory"))
                )
            found += [(file, None) for file in files]
        elif path.exists():
            found.append((path, None))
        else:
            found.append((path, Problem("", "no such file or directory")))
    return found


def validate_paths(paths: Iterable[str | Path]) -> dict[str, list[Problem]]:
    """Check character files (directories expand to their character files, searched
    recursively): file name → its problems, an empty list when the file is valid. A missing path
    or a directory without character files is reported under its own name. For warnings too
    (things that load but will not act as written), see :func:`carrier.character.check_paths`."""
    results: dict[str, list[Problem]] = {}
    for path, problem in expand_paths(paths):
        if problem is not None:
            results[str(path)] = [problem]
            continue
        try:
            load_character(path)
        except CharacterError as exc:
            results[str(path)] = exc.problems
        else:
            results[str(path)] = []
    return results


def _parse_text(text: str, fmt: Literal["json", "yaml"], source: str | None) -> Any:
    if fmt == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            raise CharacterError(source, [Problem("", where)]) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "syntax error"
        raise CharacterError(source, [Problem("", f"invalid YAML{where}: {what}")]) from None
    except yaml.YAMLError as exc:
        raise CharacterError(source, [Problem("", f"invalid YAML: {exc}")]) from None
