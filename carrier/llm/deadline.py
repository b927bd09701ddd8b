"""The turn's deadline for model calls, set once around a turn and read by every call in it.

A turn calls the model several times (the answer, a repair, the answer after tools, fact
extraction, a summary), from stages that do not know each other. The runtime opens
:func:`model_deadline` around the turn; a provider reads :func:`current_deadline` and ends its
retries and fallbacks by then, so the turn as a whole cannot run past it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["Deadline", "current_deadline", "model_deadline"]


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float
    """The ``time.monotonic()`` instant model calls must end by."""
    seconds: float
    """How long it was when set (for messages: "model deadline of 45 s reached")."""

    def remaining(self, now: float | None = None) -> float:
        return self.at - (time.monotonic() if now is None else now)


_deadline: ContextVar[Deadline | None] = ContextVar("carrier_model_deadline", default=None)


@contextmanager
def model_deadline(seconds: float | None) -> Iterator[Deadline | None]:
    """Model calls inside end within ``seconds`` from now (``None``: no deadline of its own).

    Nested deadlines keep the earlier one."""
    outer = _deadline.get()
    mine = None if seconds is None else Deadline(time.monotonic() + seconds, seconds)
    if mine is None or (outer is not None and outer.at <= mine.at):
        mine = outer
    token = _deadline.set(mine)
    try:
        yield mine
    finally:
        _deadline.reset(token)


def current_deadline() -> Deadline | None:
    """The deadline of the turn this code runs in, if any."""
    return _deadline.get()
