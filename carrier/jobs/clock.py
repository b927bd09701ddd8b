"""Time as an injected dependency: stores, workers and schedulers read a :data:`Clock`, so tests
move time by hand (:class:`ManualClock`) instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from carrier.types import utcnow

__all__ = ["Clock", "ManualClock", "system_clock"]

Clock = Callable[[], datetime]
"""A function returning the current time, timezone-aware (UTC)."""

system_clock: Clock = utcnow
"""The real clock."""


class ManualClock:
    """A clock that moves only when told to. Usage::

    clock = ManualClock(datetime(2024, 5, 1, tzinfo=UTC))
    store = SQLiteJobStore(path=..., clock=clock)
    clock.advance(seconds=90)
    """

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move forward by ``seconds`` (and any ``timedelta`` keywords); returns the new time."""
        self.now += timedelta(seconds=seconds, **delta)
        return self.now

    def set(self, when: datetime) -> None:
        self.now = when

    def __repr__(self) -> str:
        return f"ManualClock({self.now.isoformat()})"
