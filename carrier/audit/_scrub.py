"""What an event may hold: every string redacted, everything small (internal).

This is the one place the audit log sends text through the redactor, so no secret value is ever
stored in it whatever a call site passes. Details are also bounded: strings are cut, containers
are cut, and values that are not JSON become their ``str``, so one careless call site cannot
bloat the log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from carrier.audit.model import AuditEvent

__all__ = ["MAX_ITEMS", "MAX_TEXT", "redact_text", "scrub"]

MAX_TEXT = 500
"""Characters kept of one string in a detail."""
MAX_ITEMS = 50
"""Keys kept of one mapping, items of one list."""
MAX_DEPTH = 4
_SCAN = 20_000
"""Characters of one string the redactor reads before the cut: far beyond :data:`MAX_TEXT`, so
a secret is never cut before it is recognized (and only then is the text cut)."""


def redact_text(text: str) -> str:
    """``text`` through the process-wide redactor (:mod:`carrier.safety.redact`): the known secret
    values the edge taught it and every secret shape. Not reported as a redaction (``where``
    None): the audit log is where secrets are kept out of, not an exit they leave by."""
    from carrier.safety.redact import current_redactor

    return current_redactor().clean(text, where=None)


def _text(value: str, limit: int = MAX_TEXT) -> str:
    """Redacted first, cut after: a cut must not leave half a secret the redactor misses."""
    return redact_text(value[:_SCAN])[:limit]


def _clean(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return _text(value)
    if depth >= MAX_DEPTH:
        return _text(str(value))
    if isinstance(value, Mapping):
        return {
            _text(str(key), 100): _clean(item, depth + 1)
            for key, item in list(value.items())[:MAX_ITEMS]
        }
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes | bytearray):
        return [_clean(item, depth + 1) for item in list(value)[:MAX_ITEMS]]
    return _text(str(value))


def scrub(event: AuditEvent) -> AuditEvent:
    """The event as it may be stored: its text fields and every string in its detail redacted,
    the detail bounded."""
    return event.model_copy(
        update={
            "actor": _text(event.actor, 200) if event.actor is not None else None,
            "action": _text(event.action, 300),
            "target": _text(event.target, 300) if event.target is not None else None,
            "detail": _clean(dict(event.detail), 0),
        }
    )
