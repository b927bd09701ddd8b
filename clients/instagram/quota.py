"""A rolling 24 h count of published posts, persisted in the Store so restarts keep it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from carrier.memory.base import Store
from carrier.types import utcnow
from clients.instagram.errors import QuotaExceeded

__all__ = ["PublishCounter"]


class PublishCounter:
    """Publish times of one account within the last ``window``; at ``limit`` it says wait."""

    def __init__(
        self,
        store: Store,
        key: str,
        *,
        limit: int,
        window: timedelta = timedelta(hours=24),
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.key = key
        self.limit = limit
        self.window = window
        self.clock = clock

    async def times(self) -> list[datetime]:
        """Publish times still inside the window, oldest first."""
        raw = await self.store.get_setting(self.key) or []
        since = self.clock() - self.window
        times = sorted(datetime.fromisoformat(t) for t in raw)
        return [t for t in times if t > since]

    async def retry_at(self) -> datetime | None:
        """When the oldest counted publish leaves the window (``None`` when nothing is counted)."""
        times = await self.times()
        return times[0] + self.window if times else None

    async def check(self) -> None:
        """Raise :class:`QuotaExceeded` when ``limit`` posts are already in the window."""
        times = await self.times()
        if len(times) >= self.limit:
            # the slot frees when the oldest of the last `limit` posts leaves the window
            retry_at = times[len(times) - self.limit] + self.window
            raise QuotaExceeded(
                retry_at, f"{len(times)} posts in the last 24 h (local limit {self.limit})"
            )

    async def record(self, at: datetime | None = None) -> None:
        times = [*await self.times(), at or self.clock()]
        await self.store.set_setting(self.key, [t.isoformat() for t in times])
