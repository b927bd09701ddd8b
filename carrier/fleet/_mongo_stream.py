"""Waking followers through a MongoDB change stream (internal to the MongoDB fleet store).

A replica set (Atlas, or a single-node one as in ``docker/compose.yaml``) tells a watcher of every
insert into the change log as it happens; a standalone server refuses ``watch`` and followers
poll instead. The stream only *wakes* waiters (it rings the store's bell): what they return is
always read from the log by ``seq``. So a stream that drops, lags or misses an event loses
nothing: the waiters read the log every :data:`BACKSTOP_S` anyway, every
:attr:`~carrier.fleet.base.FleetStore.poll_s` while the stream is down, and once more when it
is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from pymongo.asynchronous.change_stream import AsyncChangeStream
from pymongo.asynchronous.collection import AsyncCollection

from carrier.errors import StoreError
from carrier.fleet._wake import Bell

__all__ = ["BACKSTOP_S", "ChangeStreamBell"]

log = logging.getLogger(__name__)

Document = dict[str, Any]

BACKSTOP_S = 1.0
"""How often a waiter reads the log while the stream is up, in case the stream missed one."""
RETRY_S = (1.0, 30.0)
"""The first and the longest wait before opening a stream that ended or failed again."""
_INSERTS = [{"$match": {"operationType": "insert"}}]


class ChangeStreamBell:
    """Follows the inserts into one collection and rings ``bell`` at each, in a task of its own.

    ``collection`` gives the collection to watch, ``errors`` turns driver errors into
    :class:`StoreError` (no password in them), ``where`` names the database in log lines."""

    def __init__(
        self,
        *,
        collection: Callable[[], AsyncCollection[Document]],
        bell: Bell,
        errors: Callable[[str], AbstractContextManager[None]],
        where: str,
    ) -> None:
        self._collection, self._bell, self._errors, self._where = collection, bell, errors, where
        self._task: asyncio.Task[None] | None = None
        self.live = False
        """True while a stream is open: waiters then need not poll often."""

    async def start(self) -> bool:
        """Open the stream and follow it; False (and nothing started) when the server has no
        change streams (a standalone server), or the stream could not be opened."""
        try:
            with self._errors("opening a change stream on the change log"):
                stream = await self._collection().watch(_INSERTS)
        except StoreError as exc:
            log.info("%s; followers poll the change log instead", exc)
            return False
        log.debug("MongoDB fleet store %s: following the change log by change stream", self._where)
        self.live = True
        self._task = asyncio.create_task(self._follow(stream), name="carrier-fleet-change-stream")
        return True

    async def stop(self) -> None:
        task, self._task = self._task, None
        self.live = False
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self, stream: AsyncChangeStream[Document] | None) -> None:
        delay = RETRY_S[0]
        while True:
            try:
                if stream is None:
                    with self._errors("opening the change stream on the change log again"):
                        stream = await self._collection().watch(_INSERTS)
                    log.info("MongoDB fleet store %s: change stream back", self._where)
                self.live = True
                self._bell.ring()  # whatever came while it was down: waiters read again
                with self._errors("following the change stream on the change log"):
                    async with stream:
                        async for _ in stream:
                            self._bell.ring()
                            delay = RETRY_S[0]
                log.warning("MongoDB fleet store %s: the change stream ended", self._where)
            except StoreError as exc:
                log.warning("%s", exc)
            self.live, stream = False, None
            self._bell.ring()  # waiters go back to polling at once
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_S[1])
