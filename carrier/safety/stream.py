"""Redacting text that goes out piece by piece (SSE, a terminal, a model's stream).

A secret may arrive split across pieces (``"sk-pr"`` then ``"oj-Ab3d..."``), so a piece cannot
simply be redacted on its own. :class:`StreamRedactor` holds back the tail that could still become
a secret and lets out only text whose fate is settled:

- the last ``longest - 1`` characters, where ``longest`` is the longest known value (or encoding
  of one): a known value starting there may not be complete yet;
- the trailing run of non-space characters: every secret shape but a PEM block is one unbroken
  token, and the token may still grow into one;
- from an unfinished ``-----BEGIN`` on (a PEM block ends at its ``-----END`` line);
- and never the middle of a secret already found: the cut moves back to its start.

What it lets out, put together with :meth:`StreamRedactor.finish`, is exactly what
:meth:`Redactor.redact` makes of the whole text. The price is latency: text comes out a word
behind (more where known values are long, or for text written without spaces).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from carrier.safety.redact import Redactor, Span

__all__ = ["StreamRedactor"]

_CONTEXT = 64
"""Raw characters kept from before the held text, so patterns that look behind (``://``,
``Bearer ``, ``?api_key=``) or check a word boundary see what the whole text would show."""
_PEM_BEGIN = "-----BEGIN"
_PEM_END = "-----END"


class StreamRedactor:
    """``feed(piece)`` returns the text safe to send now; ``finish()`` returns the rest.

    One per stream; not shared between tasks. ``count`` is how many secrets were replaced so
    far; each replacement is reported to the redactor's listeners as it goes out.
    """

    def __init__(self, redactor: Redactor, *, where: str | None) -> None:
        self.redactor = redactor
        self.where = where
        self.count = 0
        self._context = ""
        self._buffer = ""
        self._finished = False

    @property
    def held(self) -> int:
        """How many characters are held back now."""
        return len(self._buffer)

    def feed(self, chunk: str) -> str:
        """Take the next piece; return what may be sent now (often ``""``)."""
        if self._finished:
            raise RuntimeError("this stream was finished; start another with Redactor.stream()")
        if not chunk:
            return ""
        self._buffer += chunk
        return self._release(final=False)

    def finish(self) -> str:
        """The stream ended: return everything still held, redacted. Call it once."""
        if self._finished:
            return ""
        out = self._release(final=True)
        self._finished = True
        return out

    def _release(self, *, final: bool) -> str:
        offset = len(self._context)
        text = self._context + self._buffer
        spans = self.redactor.spans(text)
        cut = len(text) if final else self._safe_cut(text, offset, spans)
        if cut <= offset:
            return ""
        # Spans that end in the context went out (replaced) before; one reaching from it into
        # the held text cannot happen (the cut never splits a secret), but is cut short if so.
        due = [(max(s, offset) - offset, e - offset, k) for s, e, k in spans if offset < e <= cut]
        out = self.redactor.replace(text[offset:cut], due, where=self.where)
        self.count += out.count
        self._context = text[:cut][-_CONTEXT:]
        self._buffer = text[cut:]
        return out.text

    def _safe_cut(self, text: str, offset: int, spans: list[Span]) -> int:
        """Where the text whose redaction can no longer change ends."""
        cut = len(text)
        longest = self.redactor.longest
        if longest > 1:
            cut = min(cut, len(text) - (longest - 1))
        token = len(text)
        while token > offset and not text[token - 1].isspace():
            token -= 1
        cut = min(cut, token)
        begin = text.rfind(_PEM_BEGIN, offset)
        if begin >= 0 and text.find(_PEM_END, begin) < 0:
            cut = min(cut, begin)
        for start, end, _ in spans:
            if start < cut < end:
                cut = start
        return max(cut, offset)
