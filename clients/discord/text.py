"""Small text helpers shared by the client and the slash commands (no discord import)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["escape_mass_mentions", "human_size", "names_in", "tidy"]

_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f"
)
"""Characters that show as nothing (zero-width spaces and joiners, direction marks, variation
selectors, soft hyphens, tags): they may sit between ``@`` and the word unseen."""
_MASS = re.compile(rf"([@\uff20\ufe6b])[{_INVISIBLE}]*(everyone|here)", re.IGNORECASE)


def escape_mass_mentions(text: str) -> str:
    """Break ``@everyone`` and ``@here`` with a zero-width space so they never render as pings,
    even if ``AllowedMentions`` were lost on the way (defence in depth). Whatever follows the
    word (``@everyoneX``, ``@here!``), whatever invisible characters sit after the ``@``, and the
    fullwidth at sign (U+FF20) count: the match is on the prefix, not on a word boundary. Escaping twice
    gives the same text."""
    return _MASS.sub("\\1\u200b\\2", text)


def names_in(text: str, names: Iterable[str | None]) -> bool:
    """Whether any of ``names`` appears in ``text`` as a whole word (case-insensitive)."""
    lowered = text.lower()
    for name in names:
        word = (name or "").strip().lower()
        if len(word) >= 2 and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lowered):
            return True
    return False


def tidy(text: str) -> str:
    """Collapse the gaps a removed mention leaves (``"@Bot, hi"`` → ``"hi"``)."""
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"^[\s,:;]+", "", text)
    return text.strip()


def human_size(size: int | None) -> str:
    if size is None:
        return "unknown size"
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1024 or unit == "MB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} MB"
