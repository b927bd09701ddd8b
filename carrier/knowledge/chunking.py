"""Splitting documents into overlapping chunks of about ``Chunking.words`` words.

Chunks end at a paragraph break where one lies in the last quarter of the window, else at a
sentence end in its second half, else after exactly ``words`` words. The next chunk starts about
``overlap`` of a chunk earlier, at a sentence start where one is near. A tail of fewer than
``min_words`` new words is merged into the chunk before it. Each chunk is a slice of the original
text (line breaks and markdown kept), and the same text always gives the same chunks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["Chunking", "chunk_text", "count_words"]

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?\u2026\u3002][\"'\u201d\u2019)\]]*$")  # closing quotes may follow
_PARAGRAPH_GAP = re.compile(r"\n[^\S\n]*\n")

_NONE, _SENTENCE, _PARAGRAPH = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Chunking:
    """How documents are cut. Part of each document's index entry: changing it re-chunks."""

    words: int = 800
    """Target chunk size in words (whitespace-separated tokens)."""
    overlap: float = 0.15
    """Fraction of a chunk repeated at the start of the next one."""
    min_words: int = 50
    """No chunk is shorter, unless the whole document is; a shorter tail joins the chunk before."""
    embed_words: int = 150
    """A chunk's vector is the mean of the vectors of its parts of at most this many words (0: one
    vector of the whole text). Embedding models read a window (all-MiniLM-L6-v2: 256 tokens,
    about 190 words) and ignore the rest, so one vector of an 800-word chunk would describe only
    its first quarter."""

    def __post_init__(self) -> None:
        if self.words < 1:
            raise ValueError(f"Chunking.words must be >= 1, got {self.words}")
        if not 0 <= self.overlap <= 0.5:
            raise ValueError(f"Chunking.overlap must be in [0, 0.5], got {self.overlap}")
        if not 0 <= self.min_words <= self.words:
            raise ValueError(f"Chunking.min_words must be in [0, words], got {self.min_words}")
        if self.embed_words < 0:
            raise ValueError(f"Chunking.embed_words must be >= 0, got {self.embed_words}")

    @property
    def overlap_words(self) -> int:
        return round(self.words * self.overlap)

    @property
    def signature(self) -> str:
        """Stored with each document: a document chunked differently is ingested again."""
        return (
            f"words={self.words},overlap={self.overlap_words},min={self.min_words},"
            f"embed={self.embed_words}"
        )

    def embedding_parts(self, chunk: str) -> list[str]:
        """``chunk`` cut into consecutive parts of at most ``embed_words`` words (whole when
        short), each embedded on its own; a last part shorter than half joins the one before."""
        spans = [m.span() for m in _WORD.finditer(chunk)]
        size = self.embed_words
        if not size or len(spans) <= size:
            return [chunk]
        starts = list(range(0, len(spans), size))
        if len(spans) - starts[-1] < size / 2:
            starts.pop()
        ends = [*starts[1:], len(spans)]
        return [chunk[spans[a][0] : spans[b - 1][1]] for a, b in zip(starts, ends, strict=True)]


def count_words(text: str) -> int:
    return sum(1 for _ in _WORD.finditer(text))


def chunk_text(text: str, chunking: Chunking | None = None) -> list[str]:
    """The chunks of ``text``: none for a blank text, one for a text of at most ``words`` words."""
    c = chunking or Chunking()
    spans = [m.span() for m in _WORD.finditer(text)]
    n = len(spans)
    if n == 0:
        return []
    breaks = _breaks(text, spans)
    chunks: list[str] = []
    start = 0
    while True:
        if n - start <= c.words:
            end = n
        else:
            end = _choose_end(breaks, start, c.words)
            if n - end < c.min_words:
                end = n  # a short tail joins this chunk rather than standing alone
        chunks.append(text[spans[start][0] : spans[end - 1][1]])
        if end == n:
            return chunks
        start = _choose_start(breaks, start, end, c.overlap_words)


def _breaks(text: str, spans: list[tuple[int, int]]) -> list[int]:
    """``breaks[i]``: how strong the boundary after word ``i`` is (none, sentence, paragraph)."""
    out = []
    for i in range(len(spans) - 1):
        gap = text[spans[i][1] : spans[i + 1][0]]
        word = text[spans[i][0] : spans[i][1]]
        if _PARAGRAPH_GAP.search(gap) or ("\n" in gap and text[spans[i + 1][0]] == "#"):
            out.append(_PARAGRAPH)  # a blank line, or a markdown heading on the next line
        elif _SENTENCE_END.search(word) or "\n" in gap:
            out.append(_SENTENCE)  # a sentence end, or a line break (list items, verse, PDF lines)
        else:
            out.append(_NONE)
    out.append(_PARAGRAPH)  # the end of the text
    return out


def _choose_end(breaks: list[int], start: int, size: int) -> int:
    """Where a chunk that starts at word ``start`` ends (exclusive); more than ``size`` words
    remain."""
    limit = start + size
    for level, lowest in (
        (_PARAGRAPH, start + math.ceil(size * 0.75)),
        (_SENTENCE, start + math.ceil(size * 0.5)),
    ):
        for end in range(limit, max(lowest, start + 1) - 1, -1):
            if breaks[end - 1] >= level:
                return end
    return limit


def _choose_start(breaks: list[int], start: int, end: int, overlap: int) -> int:
    """Where the chunk after ``[start, end)`` starts: about ``overlap`` words before ``end``, at a
    sentence start when one lies within half the overlap of that point."""
    if overlap == 0:
        return end
    ideal = end - overlap
    slack = overlap // 2
    best: int | None = None
    for candidate in range(max(ideal - slack, start + 1), min(ideal + slack, end - 1) + 1):
        if breaks[candidate - 1] >= _SENTENCE and (
            best is None or abs(candidate - ideal) < abs(best - ideal)
        ):
            best = candidate
    return max(best if best is not None else ideal, start + 1)
