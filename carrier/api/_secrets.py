"""Keeping secret references out of responses, and in the store across edits.

A character names its secrets by environment reference (``"$DISCORD_API_TOKEN"``). Responses leave
those references out and show ``{"NAME": "set" | "unset"}`` instead; a PUT that leaves them out
keeps the stored ones, so a GET → edit → PUT round trip loses nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal

from carrier.character import Character, is_secret_name

__all__ = ["keep_secret_refs", "mask_config", "public_character", "secret_status"]

Path = tuple[str, ...]


def _secret_paths(data: Mapping[str, Any]) -> list[Path]:
    """Where secret references sit in camelCase or snake_case character data."""
    paths: list[Path] = []
    if "secrets" in data:
        paths.append(("secrets",))
    settings = data.get("settings")
    if isinstance(settings, Mapping):
        if "secrets" in settings:
            paths.append(("settings", "secrets"))
        paths += [("settings", str(k)) for k in settings if is_secret_name(str(k))]
    for key in ("clientConfig", "client_config"):
        config = data.get(key)
        if isinstance(config, Mapping):
            for client, section in config.items():
                if isinstance(section, Mapping):
                    paths += [(key, str(client), str(k)) for k in section if is_secret_name(str(k))]
    return paths


def _get(data: Mapping[str, Any], path: Path) -> Any:
    node: Any = data
    for part in path:
        node = node[part]
    return node


def public_character(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of character data without its secret references."""
    out = copy.deepcopy(dict(data))
    for path in _secret_paths(out):
        parent = _get(out, path[:-1])
        parent.pop(path[-1], None)
    return out


def keep_secret_refs(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` with each secret reference of ``old`` that ``new`` leaves out put back."""
    out = copy.deepcopy(dict(new))
    for path in _secret_paths(old):
        node: Any = out
        for part in path[:-1]:
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None and isinstance(node, dict):
                nxt = node[part] = {}
            node = nxt
        if isinstance(node, dict) and path[-1] not in node:
            node[path[-1]] = copy.deepcopy(_get(old, path))
    return out


def secret_status(
    character: Character, environ: Mapping[str, str]
) -> dict[str, Literal["set", "unset"]]:
    """Each secret the character names, and whether it resolves to a value here."""
    return {
        name: "set" if ref.resolve(environ) else "unset"
        for name, ref in sorted(character.secret_refs().items())
    }


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A client configuration with secret-looking values replaced by ``set``/``unset``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if is_secret_name(str(key)):
            out[key] = "set" if value else "unset"
        elif isinstance(value, Mapping):
            out[key] = mask_config(value)
        else:
            out[key] = value
    return out
