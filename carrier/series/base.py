"""The SeriesStore: counters per agent, per minute and per day, beside the store.

A backend implements four primitives (add to counters in one write, select counters, delete
those older than a time, read its schema version); what callers use is built on them here, so
both backends behave alike and pass ``tests/series/test_contract.py``. Writes come from a
:class:`~carrier.series.recorder.SeriesRecorder`, which buffers a few seconds of turns in memory
and adds them in one write: a turn never waits for the store.

Usage::

    series = SeriesStore.from_settings(settings)   # MongoDB if CARRIER_MONGODB_URI is set
    async with series:
        await series.add([Row(Step.MINUTE, t, agent_id, "turns", 1.0)])
        rows = await series.select(Step.DAY, start, end, names=["cost_usd"])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self

from carrier.series.model import Row, Step, prefix_range

if TYPE_CHECKING:
    from carrier.settings import Settings

__all__ = ["NameFilter", "SeriesStore"]

NameFilter = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
"""Names wanted exactly, and ``(low, high)`` ranges of names wanted by prefix."""


class SeriesStore(ABC):
    """Counters of every agent. Coroutine-safe; several processes may share one database (each
    adds to the same counters: additions commute)."""

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    async def open(self) -> None:
        """Connect; create the table or collection and indexes idempotently; migrate."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def schema_version(self) -> int: ...

    # -- backend primitives ----------------------------------------------------------------
    @abstractmethod
    async def _add(self, rows: Sequence[Row]) -> None:
        """Add each row's value to its counter (created at 0), all in one write."""

    @abstractmethod
    async def _select(
        self, step: Step, start: int, end: int, agents: Sequence[str] | None, names: NameFilter
    ) -> list[Row]:
        """The counters of ``step`` with ``start <= t < end``, of ``agents`` (None: every
        agent), whose name matches ``names``; in no particular order."""

    @abstractmethod
    async def _delete_before(self, step: Step, t: int) -> int:
        """Delete the counters of ``step`` older than ``t``; how many went."""

    # -- what callers use ------------------------------------------------------------------
    async def add(self, rows: Iterable[Row]) -> None:
        """Add to the counters, in one write. Raises :class:`~carrier.errors.StoreError`."""
        batch = [row for row in rows if row.value]
        if batch:
            await self._add(batch)

    async def select(
        self,
        step: Step,
        start: int,
        end: int,
        *,
        names: Iterable[str] = (),
        prefixes: Iterable[str] = (),
        agents: Sequence[str] | None = None,
    ) -> list[Row]:
        """The counters of ``step`` in ``[start, end)`` named exactly ``names`` or starting with
        one of ``prefixes``, of ``agents`` (None: all), sorted by time, agent and name."""
        wanted: NameFilter = (tuple(names), tuple(prefix_range(p) for p in prefixes))
        if not wanted[0] and not wanted[1]:
            return []
        rows = await self._select(step, start, end, agents, wanted)
        return sorted(rows, key=lambda r: (r.t, r.agent, r.name))

    async def prune(self, *, now: float, minute_days: int, day_days: int) -> int:
        """Delete minute counters older than ``minute_days`` and day counters older than
        ``day_days`` (a day at least); how many went."""
        gone = await self._delete_before(Step.MINUTE, int(now) - max(1, minute_days) * 86_400)
        gone += await self._delete_before(Step.DAY, int(now) - max(1, day_days) * 86_400)
        return gone

    # -- construction ----------------------------------------------------------------------
    @staticmethod
    def from_settings(settings: Settings) -> SeriesStore:
        """The series beside the store the settings name: a collection of the MongoDB database
        when ``CARRIER_MONGODB_URI`` is set, else a table of ``<data_dir>/carrier.db``. Not
        opened."""
        if settings.mongodb_uri is not None:
            from carrier.series.mongo import MongoSeriesStore

            return MongoSeriesStore.from_url(settings.mongodb_uri.get_secret_value())
        from carrier.series.sqlite import SQLiteSeriesStore

        return SQLiteSeriesStore(path=settings.store_path)
