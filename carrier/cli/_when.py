"""Times as people type them on the command line: an age (``30d``, ``12h``, ``90m``, ``2w``) or a
date and time (ISO 8601, UTC unless it says otherwise). Shared by ``carrier audit`` and
``carrier memory prune``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import typer

__all__ = ["parse_age", "parse_time"]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str, *, option: str) -> timedelta:
    """``30d`` → 30 days; a :class:`typer.BadParameter` naming ``option`` otherwise."""
    match = _AGE.match(text)
    if match is None:
        raise typer.BadParameter(
            f"{text!r} is not an age; write a number and a unit: 30d, 12h, 90m, 2w",
            param_hint=option,
        )
    return timedelta(**{_UNIT[match[2].lower()]: float(match[1])})


def parse_time(text: str, *, option: str, now: datetime | None = None) -> datetime:
    """An age ago (``24h``: a day before ``now``) or an ISO 8601 date or time (UTC when it names
    no zone)."""
    if _AGE.match(text):
        return (now or datetime.now(UTC)) - parse_age(text, option=option)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither an age (24h, 7d) nor a date and time (2025-06-01, "
            "2025-06-01T09:30)",
            param_hint=option,
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
