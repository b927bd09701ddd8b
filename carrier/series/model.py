"""What the time series hold: counters, per agent, rolled up per minute and per day.

Everything stored is a counter (a sum that only grows within its bucket), keyed by the step
(``minute`` or ``day``), the bucket's start (seconds since the epoch, UTC), the agent (``""``
for what belongs to no agent, such as a redaction in a log line) and the counter's name. A
latency is a small histogram kept as counters too, one per fixed bucket
(``latency.<stage>.<index>``), so minutes add up to days and agents to the whole process and
percentiles can be read from any sum (:func:`percentile`). Nothing is averaged before it is
stored, so a rollup never loses what a finer step knew.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

__all__ = [
    "COST",
    "ERRORS",
    "JOBS",
    "LATENCY",
    "LATENCY_BOUNDS_MS",
    "REDACTIONS",
    "TOKENS_COMPLETION",
    "TOKENS_PROMPT",
    "TOTAL_STAGE",
    "TURNS",
    "Row",
    "Step",
    "bucket_start",
    "latency_name",
    "month_start",
    "percentile",
]

TURNS = "turns"
"""Turns finished, whatever their outcome."""
ERRORS = "errors"
"""Turns that ended ``failed`` (no usable answer from the model). A turn that raised never
reaches the ``on_turn_end`` hooks: its client logs it, and ``/metrics`` counts it."""
TOKENS_PROMPT = "tokens.prompt"
TOKENS_COMPLETION = "tokens.completion"
COST = "cost_usd"
"""Model cost in US dollars, from litellm's cost figures (``Usage.cost_usd``)."""
REDACTIONS = "redactions"
"""Secrets replaced before text left Carrier."""
JOBS = "jobs."
"""Prefix of job outcomes: ``jobs.succeeded``, ``jobs.failed``..."""
LATENCY = "latency."
"""Prefix of the latency histograms: ``latency.<stage>.<bucket index>``."""
TOTAL_STAGE = "turn"
"""The latency of the whole turn, beside its stages'."""

LATENCY_BOUNDS_MS: tuple[float, ...] = (
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
)  # fmt: skip
"""Upper bounds of the latency buckets; a last bucket holds everything slower."""


class Step(StrEnum):
    MINUTE = "minute"
    DAY = "day"

    @property
    def seconds(self) -> int:
        return 60 if self is Step.MINUTE else 86_400


@dataclass(frozen=True, slots=True)
class Row:
    """One stored counter: ``value`` summed over the bucket starting at ``t``."""

    step: Step
    t: int
    agent: str
    name: str
    value: float


def bucket_start(at: float, step: Step) -> int:
    """The start (epoch seconds, UTC) of the ``step`` bucket holding ``at``."""
    return int(at // step.seconds) * step.seconds


def month_start(at: float) -> int:
    """The start (epoch seconds) of the UTC calendar month holding ``at``."""
    day = datetime.fromtimestamp(at, UTC)
    return int(datetime(day.year, day.month, 1, tzinfo=UTC).timestamp())


def latency_bucket(ms: float) -> int:
    """The index of the latency bucket ``ms`` falls in."""
    return bisect.bisect_left(LATENCY_BOUNDS_MS, ms)


def latency_name(stage: str, ms: float) -> str:
    return f"{LATENCY}{stage}.{latency_bucket(ms):02d}"


def percentile(counts: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a latency histogram (counts per bucket), in ms, read by
    linear interpolation within its bucket (the last bucket reads as its lower bound); None
    for an empty histogram."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    for index, count in enumerate(counts):
        if count <= 0:
            continue
        if seen + count >= rank:
            low = LATENCY_BOUNDS_MS[index - 1] if index > 0 else 0.0
            if index >= len(LATENCY_BOUNDS_MS):
                return float(low)
            high = LATENCY_BOUNDS_MS[index]
            return round(low + (high - low) * max(0.0, rank - seen) / count, 3)
        seen += count
    return float(LATENCY_BOUNDS_MS[-1])  # pragma: no cover - rounding only


def prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)`` such that a name starts with ``prefix`` iff ``low <= name < high``: an
    index range in both backends, where a LIKE or a regex may not use the index."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def is_finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))
