"""Small text helpers shared by the client and the slash commands (no discord import)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["escape_mass_mentions", "human_size", "names_in", "tidy"]

_MASS = re.compile(r"@(everyone|here)\b")


def escape_mass_mentions(text: str) -> str:
    """Break ``@everyone`` and ``@here`` with a zero-width space so they never render as pings,
    even if ``AllowedMentions`` were lost on the way (defence in depth)."""
    return _MASS.sub("@\u200b\\1", text)


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
