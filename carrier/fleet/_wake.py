"""Waiting for the change log (internal to the fleet backends): a bell that writes in this
process (and, on MongoDB, a change stream) ring, and the wait loop both backends share.

The bell only wakes a waiter early; the log, read by ``seq``, is always what the waiter returns.
A waiter takes the bell's current event *before* it reads the log, so a change written after the
read rings an event the waiter already holds: it cannot sleep through it. A change it misses
anyway (written by another process, with no stream to say so) is found by the next read, at most
``interval`` later.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from carrier.fleet.model import Change

__all__ = ["Bell", "wait_changes"]


class Bell:
    """Wakes every coroutine waiting on the events handed out before :meth:`ring`."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def armed(self) -> asyncio.Event:
        """The event the next :meth:`ring` sets."""
        return self._event

    def ring(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()


async def wait_changes(
    read: Callable[[int], Awaitable[list[Change]]],
    bell: Bell,
    after: int,
    *,
    wait_s: float,
    interval: Callable[[], float],
) -> list[Change]:
    """``read(after)`` as soon as it finds something, or ``[]`` after ``wait_s`` seconds; reads
    again when the bell rings, and every ``interval()`` seconds whatever happens."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        rung = bell.armed()
        found = await read(after)
        left = deadline - loop.time()
        if found or left <= 0:
            return found
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(interval(), left)):
                await rung.wait()
