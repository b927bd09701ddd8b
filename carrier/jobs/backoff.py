"""Exponential backoff with a cap and random jitter, for retrying failed attempts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Delay before retry ``n`` (the attempt that just failed was number ``n``):
    ``min(cap_s, base_s * factor ** (n - 1))``, then spread by ``± jitter`` (a fraction) so that
    jobs that failed together do not all come back at once.

    >>> Backoff(base_s=10, factor=2, cap_s=60, jitter=0).delay(3)
    40.0
    """

    base_s: float = 10.0
    factor: float = 2.0
    cap_s: float = 3600.0
    jitter: float = 0.1
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.cap_s < 0 or self.factor < 1 or not 0 <= self.jitter <= 1:
            raise ValueError(
                "Backoff needs base_s >= 0, cap_s >= 0, factor >= 1 and 0 <= jitter <= 1; "
                f"got {self!r}"
            )

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        try:
            raw = self.base_s * self.factor ** max(attempt - 1, 0)
        except OverflowError:  # a huge attempt number: the cap applies anyway
            raw = self.cap_s
        capped = min(self.cap_s, raw)
        if self.jitter:
            capped *= 1 + self.rng.uniform(-self.jitter, self.jitter)
        return max(min(capped, self.cap_s), 0.0)
