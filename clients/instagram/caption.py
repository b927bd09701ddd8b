"""Captions within Instagram's limits: at most ``max_hashtags`` hashtags, at most
``max_length`` characters (Instagram's own caps are 30 and 2,200)."""

from __future__ import annotations

import re

from carrier.safety.redact import current_redactor
from clients.instagram.errors import CaptionRejected

__all__ = ["prepare_caption"]

_HASHTAG = re.compile(r"(?<![\w&])#(\w+)")


def prepare_caption(text: str, *, max_hashtags: int = 5, max_length: int = 2200) -> str:
    """Redact secrets, drop hashtags past the cap (and repeats), tidy the spaces they leave, and
    check the length.

    Every caption passes here before it is drafted or published, so this is the caption's last
    guard against a secret (whatever wrote it). A caption still too long is refused rather than
    cut: a cut caption can end mid-sentence in the persona's voice, so the writer should produce a
    shorter one.
    """
    text = current_redactor().clean(text, where="instagram")
    seen: set[str] = set()

    def keep(match: re.Match[str]) -> str:
        tag = match.group(1).lower()
        if tag in seen or len(seen) >= max_hashtags:
            return ""
        seen.add(tag)
        return match.group(0)

    out = _HASHTAG.sub(keep, text)
    out = "\n".join(re.sub(r"[ \t]{2,}", " ", line).rstrip() for line in out.splitlines())
    out = re.sub(r"\n{3,}", "\n\n", out).strip()
    if len(out) > max_length:
        raise CaptionRejected(
            f"the caption has {len(out)} characters; Instagram allows at most {max_length}: "
            "write a shorter one"
        )
    return out
