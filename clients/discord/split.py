"""Split a long reply into Discord-sized parts, keeping code fences valid.

Pure text in, text out (no discord import), so it is tested on its own::

    >>> split_message("short")
    ['short']

A part ends, by preference, at a paragraph break, then a line break, then the end of a sentence,
then a space, and only as a last resort in the middle of a word. A code fence that is open at a
cut is closed at the end of the part and reopened (with its language tag) at the start of the next,
so every part renders on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DISCORD_LIMIT", "split_message"]

DISCORD_LIMIT = 2000
"""Discord's maximum message length, in characters."""

_FENCE = re.compile(r"^[ \t]*(?:(`{3,})([^`\n]*)|(~{3,})([^\n]*))$", re.MULTILINE)
_SENTENCE = re.compile(r"[.!?\u2026][)\"'\u201d\u2019]*(?=\s)")


@dataclass(frozen=True, slots=True)
class _Fence:
    marker: str
    """The fence characters, e.g. `````` or ``~~~~``."""
    opening: str
    """The opening line without surrounding whitespace, e.g. ````python``."""


@dataclass(frozen=True, slots=True)
class _Cut:
    head_end: int
    """Where the part ends (exclusive)."""
    rest_start: int
    """Where the next part starts: after the separator, which is dropped."""


def split_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` characters (see the module docstring).

    Whitespace-only input gives ``[]``. ``limit`` must leave room for a fence to be closed and
    reopened (at least 64).
    """
    if limit < 64:
        raise ValueError(f"limit must be at least 64 characters, got {limit}")
    text = text.strip("\n")
    if not text.strip():
        return []
    parts: list[str] = []
    carry: _Fence | None = None
    rest = text
    while rest:
        chunk = f"{carry.opening}\n{rest}" if carry else rest
        if len(chunk) <= limit:
            parts.append(chunk)
            break
        cut = _choose_cut(chunk, limit)
        head = chunk[: cut.head_end].rstrip()
        fence = _open_fence(chunk, cut.head_end)
        if fence is not None:
            head = f"{head}\n{fence.marker}"
        if head.strip():
            parts.append(head)
        carry = fence
        rest = chunk[cut.rest_start :]
        if carry is None:
            rest = rest.lstrip("\n")
        elif rest.startswith("\n"):
            rest = rest[1:]
    return parts


def _open_fence(text: str, end: int) -> _Fence | None:
    """The code fence still open at position ``end`` of ``text``, if any."""
    current: _Fence | None = None
    for match in _FENCE.finditer(text, 0, end):
        if match.end() > end:
            break
        marker = match.group(1) or match.group(3)
        info = (match.group(2) or match.group(4) or "").strip()
        if current is None:
            current = _Fence(marker=marker, opening=match.group(0).strip())
        elif marker[0] == current.marker[0] and len(marker) >= len(current.marker) and not info:
            current = None
    return current


def _choose_cut(chunk: str, limit: int) -> _Cut:
    """The best place to end the first part of ``chunk`` (which is longer than ``limit``)."""
    # A cut inside a fence needs room for the closing marker (a newline and up to ~10 characters).
    room = limit - 12
    window = chunk[: room + 1]
    floor = room // 3  # prefer a worse kind of break over a part that is mostly empty
    candidates: list[list[_Cut]] = [
        [_Cut(m.start(), m.end()) for m in re.finditer(r"\n[ \t]*\n", window)],
        [_Cut(m.start(), m.end()) for m in re.finditer(r"\n", window)],
        [_Cut(m.end(), m.end() + 1) for m in _SENTENCE.finditer(window)],
        [_Cut(m.start(), m.end()) for m in re.finditer(r"[ \t]+", window)],
    ]
    fallback: _Cut | None = None
    for kind, cuts in enumerate(candidates):
        ordered = sorted((c for c in cuts if 0 < c.head_end <= room), key=lambda c: -c.head_end)
        best = next((c for c in ordered if _fits(chunk, c, limit, kind)), None)
        if best is None:
            continue
        if best.head_end >= floor:
            return best
        if fallback is None or best.head_end > fallback.head_end:
            fallback = best
    if fallback is not None:
        return fallback
    return _Cut(room, room)


def _fits(chunk: str, cut: _Cut, limit: int, kind: int) -> bool:
    fence = _open_fence(chunk, cut.head_end)
    if fence is None:
        return cut.head_end <= limit
    if kind >= 2:
        return False  # never cut a code line at a sentence or a space while a better break exists
    line_start = chunk.rfind("\n", 0, cut.head_end) + 1
    if chunk[line_start : cut.head_end].strip() == fence.opening:
        return False  # a part that would hold only the fence opening line
    return cut.head_end + 1 + len(fence.marker) <= limit
