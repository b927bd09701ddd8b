"""Reading the counters as chart lines: one value per step over a time range, per agent or
summed over agents, and latencies as their p50 and p95.

``names`` are counters (``turns``, ``errors``, ``tokens.prompt``, ``tokens.completion``,
``cost_usd``, ``redactions``, ``jobs.<outcome>``) or latency histograms (``latency.<stage>``,
a stage of the pipeline or ``turn`` for the whole), read as ``latency.<stage>.p50`` and
``.p95`` lines (None where nothing was measured). Counters read as 0 where nothing happened,
so every line has one point per step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from carrier.series.base import SeriesStore
from carrier.series.model import LATENCY, LATENCY_BOUNDS_MS, Step, bucket_start, percentile

__all__ = ["MAX_POINTS", "NAME_PATTERN", "Line", "read_lines"]

MAX_POINTS = 3000
"""The most points one line may have (two days of minutes; eight years of days)."""

NAME_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$"
QUANTILES = (("p50", 0.5), ("p95", 0.95))


@dataclass(frozen=True)
class Line:
    name: str
    agent: str | None
    """The agent, or None for the sum over agents (``""`` is what belongs to none)."""
    points: list[tuple[int, float | None]]
    """(bucket start in epoch seconds, value), one per step, oldest first."""


def steps(step: Step, start: int, end: int) -> list[int]:
    """The bucket starts of ``step`` from the one holding ``start`` to before ``end``."""
    first = bucket_start(start, step)
    return list(range(first, max(first, end), step.seconds))


async def read_lines(
    store: SeriesStore,
    *,
    names: Sequence[str],
    step: Step,
    start: int,
    end: int,
    agents: Sequence[str] | None,
    total: bool,
) -> list[Line]:
    """The lines of ``names`` over ``[start, end)``, one per agent that has data (or one per
    name when ``total``). :class:`ValueError` for a range of more than :data:`MAX_POINTS`."""
    times = steps(step, start, end)
    if len(times) > MAX_POINTS:
        raise ValueError(
            f"{len(times)} {step}s asked for; at most {MAX_POINTS}: narrow from/to or use step=day"
        )
    for name in names:
        if not re.match(NAME_PATTERN, name):
            raise ValueError(
                f"{name!r} is not a series name (turns, cost_usd, latency.generate...)"
            )
    histograms = [n for n in names if n.startswith(LATENCY)]
    counters = [n for n in names if not n.startswith(LATENCY)]
    rows = await store.select(
        step,
        times[0] if times else start,
        end,
        names=counters,
        prefixes=[f"{n}." for n in histograms],
        agents=agents,
    )
    # (name, agent) -> t -> value; agent None when summed
    sums: dict[tuple[str, str | None], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    buckets: dict[tuple[str, str | None], dict[int, list[float]]] = defaultdict(dict)
    for row in rows:
        who = None if total else row.agent
        if row.name.startswith(LATENCY):
            base, _, index = row.name.rpartition(".")
            counts = buckets[(base, who)].setdefault(row.t, [0.0] * (len(LATENCY_BOUNDS_MS) + 1))
            if index.isdigit() and int(index) < len(counts):
                counts[int(index)] += row.value
        else:
            sums[(row.name, who)][row.t] += row.value
    lines: list[Line] = []
    for name in names:
        if name in counters:
            keys = sorted((k for k in sums if k[0] == name), key=lambda k: k[1] or "")
            if total and not keys:
                keys = [(name, None)]
            for key in keys:
                values = sums.get(key, {})
                lines.append(Line(name, key[1], [(t, values.get(t, 0.0)) for t in times]))
        else:
            keys = sorted((k for k in buckets if k[0] == name), key=lambda k: k[1] or "")
            if total and not keys:
                keys = [(name, None)]
            for key in keys:
                hist = buckets.get(key, {})
                for label, q in QUANTILES:
                    points = [(t, percentile(hist[t], q) if t in hist else None) for t in times]
                    lines.append(Line(f"{name}.{label}", key[1], points))
    return lines
