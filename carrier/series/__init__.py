"""Time series of what the agents do: turns, errors, stage latencies, tokens, cost, redactions.

Counters per agent, rolled up per minute and per day in the store's database
(:class:`SeriesStore`: SQLite by default, MongoDB with ``CARRIER_MONGODB_URI``), written every
few seconds by the host's :class:`SeriesRecorder` from an ``on_turn_end`` hook, read by
``GET /metrics/series`` (the console's charts) and by the budgets (:mod:`carrier.llm.budget`).

Names load on first use, so importing the package costs nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from carrier.series.base import SeriesStore
    from carrier.series.config import SeriesConfig
    from carrier.series.host import HostSeries, open_host_series
    from carrier.series.model import Row, Step
    from carrier.series.recorder import SeriesRecorder, Spend
    from carrier.series.sqlite import SQLiteSeriesStore

_WHERE = {
    "SeriesStore": "base",
    "SeriesConfig": "config",
    "HostSeries": "host",
    "open_host_series": "host",
    "Row": "model",
    "Step": "model",
    "SeriesRecorder": "recorder",
    "Spend": "recorder",
    "SQLiteSeriesStore": "sqlite",
}

__all__ = [
    "HostSeries",
    "Row",
    "SQLiteSeriesStore",
    "SeriesConfig",
    "SeriesRecorder",
    "SeriesStore",
    "Spend",
    "Step",
    "open_host_series",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
