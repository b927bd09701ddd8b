"""Retries with jittered exponential backoff, and a circuit breaker.

Both take their clock, randomness and sleep as arguments, so tests drive them without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

from carrier.errors import ProviderUnavailable

__all__ = ["Backoff", "BreakerState", "CircuitBreaker", "retry_async"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Backoff:
    """Exponential backoff with full jitter: the n-th wait (from 0) is uniform in
    ``[0, min(cap, base * 2**n)]``.

    Full jitter spreads the retries of many clients that failed together, so they do not all
    come back at the same instant.
    """

    def __init__(
        self,
        *,
        base: float = 0.5,
        cap: float = 20.0,
        random: Callable[[], float] = _random.random,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if base < 0 or cap < 0:
            raise ValueError("Backoff base and cap must be >= 0")
        self.base = base
        self.cap = cap
        self._random = random
        self._sleep = sleep

    def ceiling(self, attempt: int) -> float:
        """The largest wait after the ``attempt``-th failure (0-based)."""
        # Cap the exponent so 2**attempt never overflows a float.
        return min(self.cap, self.base * 2 ** min(attempt, 64))

    def delay(self, attempt: int) -> float:
        """A random wait in ``[0, ceiling(attempt)]``."""
        return self._random() * self.ceiling(attempt)

    async def wait(self, attempt: int) -> float:
        """Sleep for :meth:`delay` and return how long."""
        seconds = self.delay(attempt)
        await self._sleep(seconds)
        return seconds

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` with this backoff's sleep (a wait chosen by the caller: a delay cut
        short by a deadline, a server's ``Retry-After``)."""
        await self._sleep(seconds)


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    backoff: Backoff,
    retry_on: tuple[type[BaseException], ...],
    retry_if: Callable[[BaseException], bool] | None = None,
) -> T:
    """Call ``fn`` up to ``attempts`` times, waiting ``backoff`` between tries.

    An exception is retried when it is an instance of ``retry_on`` or ``retry_if(exc)`` is true;
    anything else, and the last failure, propagates unchanged.
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    for attempt in range(attempts):
        try:
            return await fn()
        except Exception as exc:
            retryable = isinstance(exc, retry_on) or (retry_if is not None and retry_if(exc))
            if not retryable or attempt == attempts - 1:
                raise
            log.debug(
                "attempt %d/%d failed (%s); retrying", attempt + 1, attempts, type(exc).__name__
            )
            await backoff.wait(attempt)
    raise AssertionError("unreachable")  # pragma: no cover


class BreakerState(StrEnum):
    CLOSED = "closed"
    """Calls go through; consecutive failures are counted."""
    OPEN = "open"
    """Calls fail fast with ``ProviderUnavailable`` until the cooldown has passed."""
    HALF_OPEN = "half_open"
    """One trial call goes through; its outcome closes or re-opens the breaker."""


class CircuitBreaker:
    """Stops calling a failing provider for a while, then tries once before trusting it again.

    closed → open after ``failure_threshold`` consecutive failures → half-open once ``cooldown``
    seconds have passed, letting exactly one trial call through → closed if it succeeds, open
    again (for another cooldown) if it fails. While open, calls raise ``ProviderUnavailable``.

    Use :meth:`call` around an awaitable, or :meth:`before_call` / :meth:`record_success` /
    :meth:`record_failure` / :meth:`release` by hand (streams).
    """

    def __init__(
        self,
        *,
        failure_threshold: int = 5,
        cooldown: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "provider",
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.failure_threshold = failure_threshold
        self.cooldown = cooldown
        self.name = name
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        """The current state, moving open → half-open when the cooldown has passed."""
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.cooldown:
            self._state = BreakerState.HALF_OPEN
            self._trial_in_flight = False
        return self._state

    @property
    def failures(self) -> int:
        """Consecutive failures counted so far."""
        return self._failures

    @property
    def retry_in(self) -> float:
        """Seconds until an open breaker lets a trial call through (0 when it would now)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self.cooldown - (self._clock() - self._opened_at))

    def before_call(self) -> None:
        """Admit a call or raise ``ProviderUnavailable``."""
        state = self.state
        if state is BreakerState.CLOSED:
            return
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return
        raise ProviderUnavailable(
            f"{self.name} is unavailable after {self._failures} consecutive failures; "
            f"calls are paused (circuit open), next try in {self.retry_in:.0f}s"
        )

    def record_success(self) -> None:
        if self._state is not BreakerState.CLOSED:
            log.info("%s recovered; circuit closed", self.name)
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._trial_in_flight = False

    def record_failure(self) -> None:
        self._failures += 1
        if self._state is BreakerState.HALF_OPEN or self._failures >= self.failure_threshold:
            if self._state is not BreakerState.OPEN:
                log.warning(
                    "%s failed %d times in a row; circuit open for %.0fs",
                    self.name,
                    self._failures,
                    self.cooldown,
                )
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()
        self._trial_in_flight = False

    def release(self) -> None:
        """A call ended with no verdict (cancelled, abandoned): free the half-open trial slot."""
        self._trial_in_flight = False

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` through the breaker: fail fast while open, record the outcome."""
        self.before_call()
        try:
            result = await fn()
        except Exception:
            self.record_failure()
            raise
        except BaseException:
            self.release()
            raise
        self.record_success()
        return result
