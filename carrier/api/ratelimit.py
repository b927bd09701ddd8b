"""Per-key token buckets, in memory (one API process; behind a load balancer each has its own)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """A token bucket per key: ``burst`` requests at once, refilled at ``rate`` per second.

    :meth:`hit` takes one token and returns 0, or returns how many seconds until one is
    available (nothing is taken then). At most ``max_keys`` buckets are kept; the least
    recently used go first (a forgotten key starts again with a full bucket).
    """

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 10_000,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def peek(self, key: str) -> float:
        """How many requests ``key`` could make now (nothing is taken)."""
        tokens, last = self._buckets.get(key, (float(self.burst), self.clock()))
        return min(float(self.burst), tokens + (self.clock() - last) * self.rate)

    def hit(self, key: str) -> float:
        now = self.clock()
        tokens, last = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait
