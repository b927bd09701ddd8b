"""A process's presence in the fleet: its id, and a lease it renews while it lives.

Each host process has an id, ``CARRIER_WORKER_ID`` or ``<hostname>-<pid>``; it owns the leases it
takes under that id. A worker also holds the lease ``worker:<id>``, renewed every
:data:`BEAT_S` seconds for :data:`TTL_S`: others (``carrier health --worker``, the console) see
which workers live, and a worker that died (kill -9) vanishes when its lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

from carrier.errors import CarrierError
from carrier.fleet.base import FleetStore

__all__ = ["BEAT_S", "TTL_S", "WORKER_PREFIX", "Presence", "process_id"]

log = logging.getLogger(__name__)

WORKER_PREFIX = "worker:"
BEAT_S = 5.0
TTL_S = 15.0


def process_id(environ: Mapping[str, str] = os.environ) -> str:
    """This process's id in the fleet: ``CARRIER_WORKER_ID``, else ``<hostname>-<pid>``."""
    given = environ.get("CARRIER_WORKER_ID", "").strip()
    return given or f"{socket.gethostname()}-{os.getpid()}"


class Presence:
    """Holds ``worker:<id>`` while running; ``async with Presence(fleet, id):``."""

    def __init__(
        self,
        fleet: FleetStore,
        owner: str,
        *,
        detail: dict[str, Any] | None = None,
        beat_s: float = BEAT_S,
        ttl_s: float = TTL_S,
    ) -> None:
        self.fleet, self.owner = fleet, owner
        self.name = WORKER_PREFIX + owner
        self.detail = dict(detail or {})
        self.beat_s, self.ttl_s = beat_s, ttl_s
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Presence:
        await self.fleet.acquire(self.name, self.owner, ttl_s=self.ttl_s, detail=self.detail)
        self._task = asyncio.create_task(self._beat(), name=f"carrier-presence-{self.owner}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(CarrierError):
            await self.fleet.release(self.name, self.owner)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.beat_s)
            try:
                if not await self.fleet.renew(self.name, self.owner, ttl_s=self.ttl_s):
                    await self.fleet.acquire(
                        self.name, self.owner, ttl_s=self.ttl_s, detail=self.detail
                    )
            except CarrierError as exc:
                log.warning("cannot renew this worker's presence (%s); retrying", exc)
