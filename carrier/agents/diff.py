"""What changed between two versions of a character, with its secret references never shown.

An operator comparing revisions (``GET /agents/{id}/revisions/{n}/diff``, ``carrier agents
diff``) wants two views: the fields that changed, each with its path (``bio[2]``,
``style.chat[0]``, ``clientConfig.discord.channels``) and its old and new values, for a program
or a quick look; and a unified diff of the two characters as YAML, for reading in context.

A character holds references to the environment variables that carry its credentials
(``settings.secrets.DISCORD_API_TOKEN: $HARBOR_DISCORD_TOKEN``). The API never shows them
(``carrier.api._secrets``), and a diff must not either: every value under ``secrets`` or under a
credential-named key (:func:`carrier.character.is_secret_name`), wherever it sits, is replaced by
:data:`SECRET`. A changed one is still reported, by its path, so an operator sees *that* the
token reference moved without seeing either side; in the YAML its new side reads
:data:`SECRET_CHANGED`. Usage::

    diff = diff_characters(old.character, new.character, old_label="revision 3",
                           new_label="revision 4")
    for change in diff.changes:
        print(change.path, change.kind, change.old, "->", change.new)
    print(diff.text)
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import yaml

from carrier.character import is_secret_name

__all__ = [
    "SECRET",
    "SECRET_CHANGED",
    "ChangeType",
    "CharacterDiff",
    "FieldChange",
    "diff_characters",
    "dump_yaml",
    "mask_secrets",
]

SECRET = "(secret reference, not shown)"
"""What stands for a secret reference in a diff, a masked character or a dump."""
SECRET_CHANGED = "(secret reference, changed; not shown)"
"""The new side of a changed secret reference in the YAML text."""

Part = str | int
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class ChangeType(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class FieldChange:
    """One changed field. For an added or removed list item the index is the one it has in the
    list where it is (new for added and changed, old for removed)."""

    path: str
    """``bio[2]``, ``style.chat[0]``, ``clientConfig.discord.channels``; a key that is not a
    plain name is quoted: ``settings["a key"]``."""
    kind: ChangeType
    old: Any = None
    """The value before (None when added), secret references replaced by :data:`SECRET`."""
    new: Any = None
    """The value after (None when removed), secret references replaced by :data:`SECRET`."""
    secret: bool = False
    """The field is (or is inside) a secret reference: its values are not shown."""
    parts: tuple[Part, ...] = field(default=(), repr=False, compare=False)
    """The path as keys and indices."""


@dataclass(frozen=True)
class CharacterDiff:
    changes: list[FieldChange]
    """In document order: the old character's keys first, then the keys only the new one has."""
    text: str
    """A unified diff of the two characters as YAML (secret references masked); empty when
    nothing changed."""

    @property
    def identical(self) -> bool:
        return not self.changes


def path_text(parts: tuple[Part, ...]) -> str:
    """``("style", "chat", 0)`` → ``style.chat[0]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _secret_key(key: str) -> bool:
    return key == "secrets" or is_secret_name(key)


def _mask(value: Any, secret: bool) -> Any:
    """``value`` with every secret leaf replaced by :data:`SECRET`; ``secret``: the whole of it
    is (inside) a secret reference. Structure (keys, list lengths) is kept."""
    if isinstance(value, Mapping):
        return {str(k): _mask(v, secret or _secret_key(str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, secret) for v in value]
    return SECRET if secret and value is not None else value


def mask_secrets(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of character data with every secret reference replaced by :data:`SECRET` (the
    keys stay, so one can see which secrets a character names)."""
    masked: dict[str, Any] = _mask(data, False)
    return masked


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (``1`` and ``True`` differ; key order does not matter)."""
    return _canonical(a) == _canonical(b)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class _Differ:
    def __init__(self) -> None:
        self.changes: list[FieldChange] = []

    def add(
        self, kind: ChangeType, parts: tuple[Part, ...], secret: bool, old: Any, new: Any
    ) -> None:
        self.changes.append(
            FieldChange(
                path=path_text(parts),
                kind=kind,
                old=_mask(old, secret) if kind != ChangeType.ADDED else None,
                new=_mask(new, secret) if kind != ChangeType.REMOVED else None,
                secret=secret,
                parts=parts,
            )
        )

    def walk(self, old: Any, new: Any, parts: tuple[Part, ...], secret: bool) -> None:
        if _same(old, new):
            return
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            for key, value in old.items():
                inner = secret or _secret_key(str(key))
                if key in new:
                    self.walk(value, new[key], (*parts, str(key)), inner)
                else:
                    self.add(ChangeType.REMOVED, (*parts, str(key)), inner, value, None)
            for key, value in new.items():
                if key not in old:
                    inner = secret or _secret_key(str(key))
                    self.add(ChangeType.ADDED, (*parts, str(key)), inner, None, value)
        elif isinstance(old, list) and isinstance(new, list):
            self.walk_list(old, new, parts, secret)
        else:
            self.add(ChangeType.CHANGED, parts, secret, old, new)

    def walk_list(
        self, old: list[Any], new: list[Any], parts: tuple[Part, ...], secret: bool
    ) -> None:
        """Items matched as a text diff matches lines, so one inserted ``bio`` line is one added
        item, not every later one changed; replaced items pair up and are compared inside."""
        matcher = difflib.SequenceMatcher(
            None, [_canonical(v) for v in old], [_canonical(v) for v in new], autojunk=False
        )
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            paired = min(i2 - i1, j2 - j1)
            for k in range(paired):
                self.walk(old[i1 + k], new[j1 + k], (*parts, j1 + k), secret)
            for i in range(i1 + paired, i2):
                self.add(ChangeType.REMOVED, (*parts, i), secret, old[i], None)
            for j in range(j1 + paired, j2):
                self.add(ChangeType.ADDED, (*parts, j), secret, None, new[j])


class _Dumper(yaml.SafeDumper):
    """Block YAML that diffs well: multi-line strings as ``|`` blocks, lists indented."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_Dumper.add_representer(str, _str)


def dump_yaml(data: Mapping[str, Any]) -> str:
    """Character data as block YAML in its own key order (``""`` for no data). Mask it first
    (:func:`mask_secrets`) if it is to be shown."""
    if not data:
        return ""
    return yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def _set(data: Any, parts: tuple[Part, ...], value: Any) -> None:
    node = data
    try:
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass  # not a leaf of this side (an added or removed branch): nothing to mark


def diff_characters(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    old_label: str = "old",
    new_label: str = "new",
    context: int = 3,
) -> CharacterDiff:
    """The changes from ``old`` to ``new`` (character data as stored: camelCase, secret
    references included; pass ``{}`` for "nothing yet"), with secret references masked."""
    differ = _Differ()
    differ.walk(dict(old), dict(new), (), False)
    before, after = mask_secrets(old), mask_secrets(new)
    for change in differ.changes:
        if change.secret and change.kind == ChangeType.CHANGED and change.parts:
            _set(after, change.parts, _mask_changed(copy.deepcopy(change.new)))
    text = "".join(
        difflib.unified_diff(
            dump_yaml(before).splitlines(keepends=True),
            dump_yaml(after).splitlines(keepends=True),
            fromfile=old_label,
            tofile=new_label,
            n=context,
        )
    )
    return CharacterDiff(changes=differ.changes, text=text)


def _mask_changed(value: Any) -> Any:
    """A masked value whose every :data:`SECRET` reads :data:`SECRET_CHANGED`."""
    if isinstance(value, dict):
        return {k: _mask_changed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_changed(v) for v in value]
    return SECRET_CHANGED if value == SECRET else value
