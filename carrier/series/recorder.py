"""SeriesRecorder: counts what turns did, in memory, and writes it every few seconds.

An ``on_turn_end`` hook (:meth:`SeriesRecorder.plugin`, given to every runtime by the host)
adds the turn to in-memory counters (a few dict updates, no I/O), and a background task adds
them to the :class:`~carrier.series.base.SeriesStore` every ``CARRIER_SERIES_FLUSH_SECONDS``
in one write, and once more on close. So recording costs a turn nothing it could wait for, and
the store sees one write per flush, not one per turn. A failed write keeps the counts for the
next flush (nothing is lost while the database is away), logged once per failure.

It also keeps what each agent spent today and this month (UTC), read back from the day
counters after each flush (so the spending of other processes sharing the store counts too)
plus what is still in memory: :meth:`spent` answers from memory, for the budgets
(:mod:`carrier.llm.budget`) to check before every model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin
from carrier.safety.redact import RedactionEvent, on_redaction
from carrier.series.base import SeriesStore
from carrier.series.config import SeriesConfig
from carrier.series.model import (
    COST,
    ERRORS,
    JOBS,
    REDACTIONS,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOTAL_STAGE,
    TURNS,
    Row,
    Step,
    bucket_start,
    is_finite,
    latency_name,
    month_start,
)
from carrier.types import MemoryStatus, Usage

__all__ = ["PLUGIN_NAME", "SeriesRecorder", "Spend"]

log = logging.getLogger(__name__)

PLUGIN_NAME = "carrier-series"
PRUNE_EVERY_S = 3600.0
JOB_OUTCOMES = ("succeeded", "retried", "failed", "deferred", "lost")


@dataclass(frozen=True)
class Spend:
    """Model cost in USD today and this calendar month (UTC)."""

    day_usd: float = 0.0
    month_usd: float = 0.0


Key = tuple[int, str, str]
"""(minute start, agent, name)."""


class SeriesRecorder:
    """Buffers counters and flushes them to ``store``; one per host process.

    ``clock`` gives seconds since the epoch (tests pass a fixed one)."""

    def __init__(
        self,
        store: SeriesStore,
        *,
        config: SeriesConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.config = config or SeriesConfig()
        self.clock = clock
        self.failures = 0
        """Flushes that could not write (their counts were kept for the next one)."""
        self._pending: dict[Key, float] = defaultdict(float)
        self._unsaved_cost: dict[tuple[int, str], float] = defaultdict(float)
        """(day start, agent) → cost not yet read back from the store."""
        self._saved_cost: dict[str, dict[int, float]] = {}
        """agent → day start → cost, as the store had it at the last flush (this month)."""
        self._saved_sums: (
            tuple[int, int, dict[str, tuple[float, float]], tuple[float, float]] | None
        ) = None
        """The same summed per agent and in all, for the day it was read (today, month)."""
        self._flush_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0
        self._unsubscribe: Callable[[], None] | None = None
        self._job_stats: Callable[[], Any] | None = None
        self._job_seen: dict[str, int] = {}

    # -- counting (no I/O) -------------------------------------------------------------------
    def count(self, agent: str, name: str, value: float = 1.0, *, at: float | None = None) -> None:
        """Add ``value`` to the counter ``name`` of ``agent`` for the current minute."""
        if not value or not is_finite(value):
            return
        now = self.clock() if at is None else at
        self._pending[(bucket_start(now, Step.MINUTE), agent, name)] += value
        if name == COST:
            self._unsaved_cost[(bucket_start(now, Step.DAY), agent)] += value

    def observe_turn(
        self,
        agent: str,
        *,
        failed: bool,
        usage: Usage,
        timings_ms: Mapping[str, float] | None,
    ) -> None:
        """One finished turn: its count, outcome, tokens, cost and the latency of each stage."""
        now = self.clock()
        self.count(agent, TURNS, at=now)
        if failed:
            self.count(agent, ERRORS, at=now)
        self.count(agent, TOKENS_PROMPT, usage.prompt_tokens, at=now)
        self.count(agent, TOKENS_COMPLETION, usage.completion_tokens, at=now)
        self.count(agent, COST, usage.cost_usd, at=now)
        if timings_ms:
            for stage, ms in timings_ms.items():
                self.count(agent, latency_name(stage, ms), at=now)
            self.count(agent, latency_name(TOTAL_STAGE, sum(timings_ms.values())), at=now)

    def observe_job(self, agent: str | None, outcome: str, count: int = 1) -> None:
        """Jobs ended (``succeeded``, ``failed``, ``retried``...)."""
        self.count(agent or "", f"{JOBS}{outcome}", count)

    def watch_jobs(self, stats: Callable[[], Any]) -> None:
        """Count job outcomes from a worker's running totals (``JobService.worker.stats``):
        at each flush, what grew since the last one is added as ``jobs.succeeded``,
        ``jobs.retried``, ``jobs.failed``, ``jobs.deferred``, ``jobs.lost`` (not tied to an
        agent). Reading the totals keeps the worker free of any knowledge of the series."""
        self._job_stats = stats
        self._job_seen = {name: int(getattr(stats(), name, 0)) for name in JOB_OUTCOMES}

    def _count_jobs(self) -> None:
        if self._job_stats is None:
            return
        now = self._job_stats()
        for name in JOB_OUTCOMES:
            value = int(getattr(now, name, 0))
            grown = value - self._job_seen.get(name, 0)
            if grown > 0:
                self.observe_job(None, name, grown)
            self._job_seen[name] = value

    def _redacted(self, event: RedactionEvent) -> None:
        self.count("", REDACTIONS, event.count)

    def plugin(self) -> Plugin:
        """The ``on_turn_end`` hook that counts every finished turn of every agent."""

        async def observe(point: HookPoint, turn: Turn) -> HookResult | None:
            try:
                self.observe_turn(
                    turn.runtime.agent_id,
                    failed=turn.final_status == MemoryStatus.FAILED,
                    usage=turn.usage,
                    timings_ms=turn.trace.get("timings_ms"),
                )
            except Exception:  # a turn that happened is never failed for its figures
                log.exception("series: a turn of agent %s was not counted", turn.runtime.agent_id)
            return None

        return Plugin(
            name=PLUGIN_NAME,
            hooks=[(HookPoint.ON_TURN_END, observe)],
            description="Counts turns, errors, tokens, cost and stage latencies for the charts.",
        )

    # -- spending (no I/O) -------------------------------------------------------------------
    def spent(self, agent: str | None = None) -> Spend:
        """What ``agent`` (None: every agent) spent today and this month, flushed or not."""
        now = self.clock()
        today, month = bucket_start(now, Step.DAY), month_start(now)
        day = total = 0.0
        sums = self._saved_sums
        if sums is not None and sums[0] == today:  # summed at the last read: the usual case
            day, total = sums[2].get(agent, (0.0, 0.0)) if agent is not None else sums[3]
        else:
            for who, days in self._saved_cost.items():
                if agent is None or who == agent:
                    for t, usd in days.items():
                        total += usd if t >= month else 0.0
                        day += usd if t == today else 0.0
        for (t, who), usd in self._unsaved_cost.items():
            if agent is None or who == agent:
                total += usd if t >= month else 0.0
                day += usd if t == today else 0.0
        return Spend(day_usd=day, month_usd=total)

    # -- writing -----------------------------------------------------------------------------
    async def flush(self) -> None:
        """Write what is buffered, in one write, then read this month's spending back. A write
        that fails keeps the counts for the next flush."""
        async with self._flush_lock:
            self._count_jobs()
            pending, self._pending = self._pending, defaultdict(float)
            written = dict(self._unsaved_cost)  # the cost in ``pending`` (and written before)
            if pending:
                try:
                    await self.store.add(_rows(pending))
                except Exception as exc:
                    self.failures += 1
                    for key, value in pending.items():  # kept, with what came meanwhile
                        self._pending[key] += value
                    log.warning(
                        "series: %d counters kept for the next flush: %s", len(pending), exc
                    )
                    return
            await self._read_spending(written)

    async def _read_spending(self, written: Mapping[tuple[int, str], float]) -> None:
        """Read this month's cost back from the store; ``written`` (in it now) is no longer
        counted from memory. On failure the memory keeps counting it (the next flush's
        ``written`` includes it again: it is taken whole from memory at each flush)."""
        now = self.clock()
        start = month_start(now)
        try:
            rows = await self.store.select(
                Step.DAY, start, bucket_start(now, Step.DAY) + 86_400, names=[COST]
            )
        except Exception as exc:
            log.warning("series: spending not read back: %s", exc)
            return
        saved: dict[str, dict[int, float]] = {}
        for row in rows:
            saved.setdefault(row.agent, {})[row.t] = row.value
        self._saved_cost = saved
        today = bucket_start(now, Step.DAY)
        per_agent = {
            who: (days.get(today, 0.0), sum(usd for t, usd in days.items() if t >= start))
            for who, days in saved.items()
        }
        both = (sum(d for d, _ in per_agent.values()), sum(m for _, m in per_agent.values()))
        self._saved_sums = (today, start, per_agent, both)
        for key, value in written.items():
            left = self._unsaved_cost.get(key, 0.0) - value
            if abs(left) < 1e-12:
                self._unsaved_cost.pop(key, None)
            else:
                self._unsaved_cost[key] = left

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Read this month's spending, hear redactions, and flush every few seconds."""
        await self._read_spending({})
        self._unsubscribe = on_redaction(self._redacted)
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="carrier-series-flush")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_s)
            try:
                await self.flush()
                if self.clock() - self._last_prune >= PRUNE_EVERY_S:
                    await self.prune()
            except Exception:  # never let one bad flush end the loop
                log.exception("series: flush failed")

    async def prune(self) -> int:
        """Delete counters older than the retention (``CARRIER_SERIES_*_DAYS``)."""
        self._last_prune = self.clock()
        return await self.store.prune(
            now=self._last_prune,
            minute_days=self.config.minute_days,
            day_days=self.config.day_days,
        )

    async def aclose(self) -> None:
        """Stop the loop and write what is left."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.flush()


def _rows(pending: Mapping[Key, float]) -> Iterator[Row]:
    """Each minute counter, and its day counter (minutes of one day summed first)."""
    days: dict[Key, float] = defaultdict(float)
    for (t, agent, name), value in pending.items():
        yield Row(Step.MINUTE, t, agent, name, value)
        days[(bucket_start(t, Step.DAY), agent, name)] += value
    for (t, agent, name), value in days.items():
        yield Row(Step.DAY, t, agent, name, value)
