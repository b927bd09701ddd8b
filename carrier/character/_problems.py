"""Turn pydantic validation errors into Problems that speak the file's language.

Paths follow the file's own spelling (``messageExamples.0.1.content.text``, or the snake_case
key when the file used it), found by walking the raw data along pydantic's error location.
Messages say what was expected and what was found, except where the value might be a secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel, to_snake
from pydantic_core import ErrorDetails

from carrier.character._describe import describe
from carrier.character.secrets import is_secret_name
from carrier.errors import Problem

__all__ = ["in_file_order", "problems_from_validation"]

_SYNONYMS: dict[str, tuple[str, ...]] = {"speaker": ("name", "user")}
_MISSING_HINTS: dict[str, tuple[str, str]] = {
    "speaker": ("name", "required field is missing: who speaks (`name`, or `user` in v0.1 files)"),
}
_EXPECTED: dict[str, str] = {
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "literal_error": "expected one of the allowed values",
}
_SKIP_TYPES = {"literal_secret"}


def problems_from_validation(
    error: ValidationError, data: object, *, skip_paths: Sequence[str] = ()
) -> list[Problem]:
    """One Problem per pydantic error, deduplicated, dropping those at or under ``skip_paths``
    (already reported, e.g. by the secret scan) and the model's own literal-secret guard."""
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for err in error.errors(include_url=False, include_input=False):
        if err["type"] in _SKIP_TYPES and skip_paths:
            continue
        path, value, found = _file_path(data, err["loc"], missing=err["type"] == "missing")
        if any(path == p or path.startswith(p + ".") for p in skip_paths):
            continue
        message = _message(err, path, value, found)
        if err["type"] == "missing":
            key = str(err["loc"][-1]) if err["loc"] else ""
            if key in _MISSING_HINTS:
                name, message = _MISSING_HINTS[key]
                path = path.rsplit(".", 1)[0] + "." + name if "." in path else name
        if (path, message) not in seen:
            seen.add((path, message))
            problems.append(Problem(path, message))
    return problems


def _file_path(
    data: object, loc: tuple[int | str, ...], *, missing: bool
) -> tuple[str, object, bool]:
    """The dotted path of ``loc`` in ``data``'s spelling, the value found there and whether it
    was found. Location parts that are not keys of the data (union tags such as ``str`` or
    ``function-before[...]``) are skipped."""
    parts: list[str] = []
    node: object = data
    found = True
    for i, seg in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, list) and isinstance(seg, int):
            if 0 <= seg < len(node):
                parts.append(str(seg))
                node = node[seg]
                continue
            parts.append(str(seg))
            node, found = None, False
            continue
        if isinstance(node, Mapping):
            key = _key_in(node, str(seg))
            if key is not None:
                parts.append(key)
                node = node[key]
                continue
            if last and missing:
                parts.append(to_camel(str(seg)) if _camel_file(node) else str(seg))
                node, found = None, False
        # otherwise a union tag or a position inside a scalar: not part of the file's path
    return ".".join(parts), node, found


def _key_in(node: Mapping[Any, Any], seg: str) -> str | None:
    for key in (seg, to_camel(seg), to_snake(seg), *_SYNONYMS.get(seg, ())):
        if key in node:
            return key
    return None


def _camel_file(node: Mapping[Any, Any]) -> bool:
    return not any(isinstance(k, str) and "_" in k and k.islower() for k in node)


def _message(err: ErrorDetails, path: str, value: object, found: bool) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required field is missing"
    expected = _EXPECTED.get(kind, err["msg"])
    if kind == "literal_error" and "ctx" in err:
        expected = f"expected {err['ctx'].get('expected', 'one of the allowed values')}"
    if "got " in expected or not found or _secret_path(path):
        return expected
    return f"{expected}, got {describe(value)}"


def _secret_path(path: str) -> bool:
    return any(part == "secrets" or is_secret_name(part) for part in path.split("."))


def in_file_order(problems: Sequence[Problem], data: object) -> list[Problem]:
    """``problems`` sorted by where their paths occur in ``data`` (file-level ones first)."""

    def position(problem: Problem) -> tuple[int, ...]:
        order: list[int] = []
        node = data
        for part in problem.path.split(".") if problem.path else []:
            if isinstance(node, Mapping):
                keys = [str(k) for k in node]
                index = keys.index(part) if part in keys else len(keys)
                order.append(index)
                node = node.get(part) if part in node else None
            elif isinstance(node, list) and part.isdigit():
                order.append(int(part))
                node = node[int(part)] if int(part) < len(node) else None
            else:
                order.append(1 << 30)
                node = None
        return tuple(order)

    return sorted(problems, key=position)
