"""Short descriptions of offending values for error messages (``got 42``, ``got a list``)."""

from __future__ import annotations

import json

__all__ = ["describe"]

_MAX = 40


def describe(value: object) -> str:
    """A short, readable form of ``value``: scalars as they would be written in JSON (long strings
    cut), containers by kind. Never call it on a value that might be a secret."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        text = value if len(value) <= _MAX else value[: _MAX - 1] + "…"
        return json.dumps(text, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"
