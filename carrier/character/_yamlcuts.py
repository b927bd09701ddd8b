"""Find YAML values cut short by a ``#`` that YAML read as the start of a comment.

In YAML, an unquoted (plain) value ends where `` #`` begins: ``text: Hang out in #jam-chat``
loads as ``"Hang out in"``, silently. Persona files are full of ``#channel`` names and
``#hashtags``, so this bites. The loaded data cannot show it (the comment is gone), so the check
reads the YAML source: it composes the node tree, whose marks say where each plain value ends,
and looks at the rest of that line.

Which values are reported (the rule, chosen so real comments stay quiet):

1. In the persona's text fields (``bio``, ``lore``, ``knowledge`` entries, ``topics``,
   ``adjectives``, ``postExamples``, ``style``, ``system``, ``description``, ``templates``,
   message example texts, lorebook keys and content), any plain value followed by a comment on
   its line. There the words go into prompts, and a ``#`` is almost always text (a channel, a
   hashtag); a real comment belongs on its own line.
2. Anywhere else (settings, client options, names), a plain string value, or an empty one, whose
   comment starts with ``#`` directly followed by a non-space character (``#jam-chat``,
   ``#35mm``): comments are written ``# note`` and channel names and hashtags are not. So
   ``model: gpt-4o  # cheap`` and numbers or booleans with comments are never reported.

Quoted values and block scalars (``|``, ``>``) are never cut, so they are never reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import yaml

__all__ = ["Cut", "find_cuts"]

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"

# Text fields as (normalized) path patterns; "*" matches any key or index. Keys are compared
# lowercased without underscores, so camelCase and snake_case spellings both match.
_TEXT_FIELDS: tuple[tuple[str, ...], ...] = (
    ("bio",),
    ("bio", "*"),
    ("lore",),
    ("lore", "*"),
    ("knowledge", "*"),
    ("topics",),
    ("topics", "*"),
    ("adjectives",),
    ("adjectives", "*"),
    ("postexamples",),
    ("postexamples", "*"),
    ("style", "*"),
    ("style", "*", "*"),
    ("system",),
    ("description",),
    ("templates", "*"),
    ("messageexamples", "*", "*", "content", "text"),
    ("lorebook", "*", "content"),
    ("lorebook", "*", "keys"),
    ("lorebook", "*", "keys", "*"),
)


class Cut(NamedTuple):
    """A value that YAML cut at a comment."""

    path: str
    """Dotted field path in the file's spelling (``messageExamples.9.1.content.text``)."""
    line: int
    """1-based line where the comment starts."""
    kept: str
    """What YAML kept of the value (empty when the whole value became a comment)."""
    comment: str
    """What YAML dropped as a comment, from the ``#``."""


def find_cuts(text: str) -> list[Cut]:
    """Every value in the YAML ``text`` cut by a comment, by the rule in the module docstring, in
    file order. Text that is not valid YAML gives no cuts (the loader reports the syntax error)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []
    if root is None:
        return []
    cuts = [cut for cut in _scan(root, [], text, set())]
    return sorted(cuts, key=lambda c: c.line)


def _scan(node: yaml.Node, path: list[str], text: str, seen: set[int]) -> Iterator[Cut]:
    if id(node) in seen:  # an alias points back at a node already walked
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _scan(value, [*path, str(key.value)], text, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _scan(item, [*path, str(i)], text, seen)
    elif isinstance(node, yaml.ScalarNode) and node.style is None:
        cut = _cut(node, path, text)
        if cut is not None:
            yield cut


def _cut(node: yaml.ScalarNode, path: list[str], text: str) -> Cut | None:
    end = node.end_mark.index
    line_end = text.find("\n", end)
    rest = text[end : len(text) if line_end < 0 else line_end]
    comment = rest.lstrip(" \t")
    if not comment.startswith("#") or comment == rest:  # a comment needs a blank before it
        return None
    if not _is_text_field(path):
        hashtag = len(comment) > 1 and not comment[1].isspace()
        if not (hashtag and node.tag in (_STR, _NULL)):
            return None
    kept = node.value if node.tag != _NULL else ""
    return Cut(".".join(path), node.end_mark.line + 1, kept, comment.rstrip())


def _is_text_field(path: list[str]) -> bool:
    parts = [p.replace("_", "").lower() for p in path]
    return any(
        len(pattern) == len(parts)
        and all(w in ("*", p) for w, p in zip(pattern, parts, strict=True))
        for pattern in _TEXT_FIELDS
    )
