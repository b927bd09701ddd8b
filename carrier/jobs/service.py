"""JobService: the job store, a worker and a scheduler started and stopped as one, for
``carrier run``. Usage::

    service = JobService.from_settings(settings)  # MongoDB if CARRIER_MONGODB_URI is set
    service.worker.register("instagram.publish", publish, max_concurrent=1)
    await service.start()
    await service.scheduler.add(Schedule(...))
    ...
    await service.stop()      # on SIGTERM: in-flight jobs get ``grace_s`` to finish
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from carrier.jobs.base import JobStore
from carrier.jobs.clock import Clock, system_clock
from carrier.jobs.scheduler import Scheduler
from carrier.jobs.worker import Worker

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = ["JobService"]

logger = logging.getLogger(__name__)


class JobService:
    """Owns the run loops of ``worker`` and ``scheduler`` over ``store``. The store is opened on
    :meth:`start` and, if ``owns_store``, closed on :meth:`stop`."""

    def __init__(
        self,
        *,
        store: JobStore,
        worker: Worker | None = None,
        scheduler: Scheduler | None = None,
        owns_store: bool = True,
    ) -> None:
        self.store = store
        self.worker = worker or Worker(store=store, clock=store.clock)
        self.scheduler = scheduler or Scheduler(store=store, clock=store.clock)
        self.owns_store = owns_store
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    def sqlite(cls, path: str | Path, *, clock: Clock = system_clock, **worker: Any) -> JobService:
        """A service over a SQLite file (usually ``<data_dir>/carrier.db``, shared with the main
        store); ``worker`` keywords go to :class:`Worker`."""
        from carrier.jobs.sqlite import SQLiteJobStore

        store = SQLiteJobStore(path=path, clock=clock)
        return cls(store=store, worker=Worker(store=store, clock=clock, **worker))

    @classmethod
    def mongo(cls, uri: str, *, clock: Clock = system_clock, **worker: Any) -> JobService:
        """A service over a MongoDB database (the URI's path, default ``carrier``; it may be the
        memory store's); ``worker`` keywords go to :class:`Worker`."""
        from carrier.jobs.mongo import MongoJobStore

        store = MongoJobStore.from_url(uri, clock=clock)
        return cls(store=store, worker=Worker(store=store, clock=clock, **worker))

    @classmethod
    def from_settings(
        cls, settings: Settings, *, clock: Clock = system_clock, **worker: Any
    ) -> JobService:
        """The service beside the store the settings name: MongoDB when ``CARRIER_MONGODB_URI``
        is set, else the SQLite file in the data dir (``<data_dir>/carrier.db``). The worker's
        lease is ``CARRIER_JOB_LEASE_SECONDS`` unless ``worker`` sets ``lease_s``."""
        worker.setdefault("lease_s", settings.job_lease_seconds)
        if settings.mongodb_uri is not None:
            return cls.mongo(settings.mongodb_uri.get_secret_value(), clock=clock, **worker)
        return cls.sqlite(settings.store_path, clock=clock, **worker)

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    async def start(self) -> None:
        """Open the store and start the worker and scheduler loops (register handlers first)."""
        if self._tasks:
            return
        await self.store.open()
        self._tasks = [
            asyncio.create_task(self.worker.run(), name="carrier jobs worker"),
            asyncio.create_task(self.scheduler.run(), name="carrier jobs scheduler"),
        ]
        logger.info("jobs: worker %s and scheduler started", self.worker.worker_id)

    async def stop(self, *, grace_s: float | None = 30.0) -> None:
        """Stop scheduling, let in-flight jobs finish for ``grace_s`` (then release them), close."""
        tasks, self._tasks = self._tasks, []
        await self.scheduler.stop()
        await self.worker.stop(grace_s=grace_s)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                logger.error("jobs: a loop ended with an error", exc_info=result)
        if self.owns_store:
            await self.store.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
