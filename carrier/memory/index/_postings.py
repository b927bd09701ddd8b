"""A vector set's filter fields as integers, and its rows listed by field value.

A :class:`~carrier.memory.index.rows.VectorSet` keeps a room, a person and a kind per row as
small integer codes (:class:`Codes`), so a filter compares integer arrays, and lists each code's
rows (:class:`Postings`), so a filter on a small room reads that room's rows rather than testing
every row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Codes", "Postings"]


@dataclass(slots=True)
class Codes:
    """Strings ↔ small integers, so filter fields are compared as integer arrays."""

    codes: dict[str, int] = field(default_factory=dict)
    values: list[str] = field(default_factory=list)
    """By code."""

    def encode(self, value: str) -> int:
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.codes)
            self.values.append(value)
        return code

    def get(self, value: str) -> int:
        return self.codes.get(value, -1)


class Postings:
    """Rows by field code (a room's rows, a kind's rows), so a filter on a small room reads its
    rows instead of testing every row. A row is appended when it gets a code; one whose code
    changed, or that died, stays in its old list, so readers check the rows they get."""

    def __init__(self) -> None:
        self._rows: list[np.ndarray] = []
        self._len: list[int] = []

    def add(self, codes: np.ndarray, rows: np.ndarray) -> None:
        if not rows.size:
            return
        parts: Iterable[tuple[int, np.ndarray]]
        if rows.size <= 16:  # a turn's few rows: grouping them in Python is cheaper
            grouped: dict[int, list[int]] = {}
            for code, row in zip(codes.tolist(), rows.tolist(), strict=True):
                grouped.setdefault(code, []).append(row)
            parts = ((code, np.array(part, dtype=np.int64)) for code, part in grouped.items())
        else:
            order = np.argsort(codes, kind="stable")
            codes, rows = codes[order], rows[order]
            distinct, starts = np.unique(codes, return_index=True)
            parts = zip(distinct.tolist(), np.split(rows, starts[1:]), strict=True)
        for code, part in parts:
            held, n = self._room_for(code, part.size)
            held[n : n + part.size] = part
            self._len[code] = n + part.size

    def add_one(self, code: int, row: int) -> None:
        """:meth:`add` of one row."""
        held, n = self._room_for(code, 1)
        held[n] = row
        self._len[code] = n + 1

    def _room_for(self, code: int, more: int) -> tuple[np.ndarray, int]:
        """The array of ``code``'s rows, with room for ``more``, and how many it holds."""
        while len(self._rows) <= code:
            self._rows.append(np.zeros(8, dtype=np.int64))
            self._len.append(0)
        held, n = self._rows[code], self._len[code]
        if n + more > held.size:
            # A new array: a reader in another thread may hold a view of the old one.
            grown = np.zeros(max(n + more, 2 * held.size), dtype=np.int64)
            grown[:n] = held[:n]
            self._rows[code] = held = grown
        return held, n

    def rows(self, code: int) -> np.ndarray:
        """The rows listed under ``code`` (none for -1, an unknown value)."""
        if not 0 <= code < len(self._rows):
            return np.zeros(0, dtype=np.int64)
        return self._rows[code][: self._len[code]]
