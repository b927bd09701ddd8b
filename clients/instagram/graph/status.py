"""Reading a container's status: retries on unclear answers and polling with backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TypeVar

from carrier.types import utcnow
from clients.instagram.errors import ContainerFailed, ContainerNotReady
from clients.instagram.graph.api import ContainerStatus, GraphAPI, UnclearResponse

__all__ = ["ContainerPoller"]

T = TypeVar("T")


class ContainerPoller:
    """Waits for containers to be ready; retries calls that are safe to repeat."""

    def __init__(
        self,
        api: GraphAPI,
        *,
        interval: float = 2.0,
        max_interval: float = 30.0,
        timeout: float = 600.0,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.interval = interval
        self.max_interval = max_interval
        self.timeout = timeout
        self.clock = clock
        self.sleep = sleep

    async def retrying(self, call: Callable[[], Awaitable[T]], attempts: int = 3) -> T:
        """Retry calls that are safe to repeat (reads, container creation) on unclear failures."""
        delay = self.interval
        for attempt in range(attempts):
            try:
                return await call()
            except UnclearResponse:
                if attempt == attempts - 1:
                    raise
                await self.sleep(delay)
                delay = min(delay * 2, self.max_interval)
        raise AssertionError("unreachable")

    async def status(self, container_id: str) -> ContainerStatus:
        return await self.retrying(lambda: self.api.container_status(container_id))

    async def wait_ready(self, container_id: str) -> str:
        """Poll until FINISHED or PUBLISHED; ERROR/EXPIRED fail; too long → ContainerNotReady."""
        deadline = self.clock() + timedelta(seconds=self.timeout)
        delay = self.interval
        while True:
            status = await self.status(container_id)
            if status.code in ("FINISHED", "PUBLISHED"):
                return status.code
            if status.code in ("ERROR", "EXPIRED"):
                raise ContainerFailed(container_id, status.code, status.message)
            if self.clock() + timedelta(seconds=delay) > deadline:
                retry_at = self.clock() + timedelta(seconds=self.max_interval)
                raise ContainerNotReady(retry_at, container_id)
            await self.sleep(delay)
            delay = min(delay * 2, self.max_interval)
