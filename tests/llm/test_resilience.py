from __future__ import annotations

import asyncio

import pytest

from carrier.errors import ProviderUnavailable
from carrier.llm.resilience import Backoff, BreakerState, CircuitBreaker, retry_async


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Flaky:
    """Raises the given exceptions in order, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_backoff_ceiling_grows_exponentially_up_to_cap() -> None:
    backoff = Backoff(base=0.5, cap=4.0)
    assert [backoff.ceiling(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.ceiling(10_000) == 4.0  # no overflow


@pytest.mark.parametrize("r", [0.0, 0.3, 0.999])
def test_backoff_full_jitter_stays_in_bounds(r: float) -> None:
    backoff = Backoff(base=1.0, cap=10.0, random=lambda: r)
    for attempt in range(8):
        delay = backoff.delay(attempt)
        assert 0.0 <= delay <= backoff.ceiling(attempt)
        assert delay == pytest.approx(r * backoff.ceiling(attempt))


def test_backoff_real_random_within_bounds() -> None:
    backoff = Backoff(base=0.1, cap=1.0)
    assert all(0.0 <= backoff.delay(a) <= backoff.ceiling(a) for a in range(50))


async def test_backoff_wait_uses_injected_sleep() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    backoff = Backoff(base=2.0, cap=5.0, random=lambda: 0.5, sleep=sleep)
    assert await backoff.wait(0) == 1.0
    assert await backoff.wait(3) == 2.5
    assert slept == [1.0, 2.5]


async def test_retry_async_retries_listed_errors_then_succeeds(
    no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    fn = Flaky(ConnectionError("a"), TimeoutError("b"))
    result = await retry_async(
        fn, attempts=3, backoff=no_wait_backoff, retry_on=(ConnectionError, TimeoutError)
    )
    assert result == "ok"
    assert fn.calls == 3
    assert sleeps == [0.5, 1.0]


async def test_retry_async_does_not_retry_other_errors(
    no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    fn = Flaky(ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        await retry_async(fn, attempts=5, backoff=no_wait_backoff, retry_on=(ConnectionError,))
    assert fn.calls == 1
    assert sleeps == []


async def test_retry_async_gives_up_after_attempts(no_wait_backoff: Backoff) -> None:
    fn = Flaky(*(ConnectionError(str(i)) for i in range(5)))
    with pytest.raises(ConnectionError, match="2"):
        await retry_async(fn, attempts=3, backoff=no_wait_backoff, retry_on=(ConnectionError,))
    assert fn.calls == 3


async def test_retry_async_retry_if_predicate(no_wait_backoff: Backoff) -> None:
    fn = Flaky(RuntimeError("status 503"), RuntimeError("status 400"))
    with pytest.raises(RuntimeError, match="400"):
        await retry_async(
            fn,
            attempts=5,
            backoff=no_wait_backoff,
            retry_on=(),
            retry_if=lambda exc: "503" in str(exc),
        )
    assert fn.calls == 2


async def test_retry_async_lets_cancellation_through(no_wait_backoff: Backoff) -> None:
    fn = Flaky(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await retry_async(fn, attempts=3, backoff=no_wait_backoff, retry_on=(Exception,))
    assert fn.calls == 1


async def test_retry_async_rejects_zero_attempts(no_wait_backoff: Backoff) -> None:
    with pytest.raises(ValueError):
        await retry_async(Flaky(), attempts=0, backoff=no_wait_backoff, retry_on=())


async def _fail() -> None:
    raise ConnectionError("down")


async def _ok() -> str:
    return "ok"


async def test_breaker_opens_after_consecutive_failures() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=3, cooldown=30, clock=clock, name="model m")
    for _ in range(3):
        assert breaker.state is BreakerState.CLOSED
        with pytest.raises(ConnectionError):
            await breaker.call(_fail)
    assert breaker.state is BreakerState.OPEN
    calls = 0

    async def counted() -> str:
        nonlocal calls
        calls += 1
        return "ok"

    with pytest.raises(ProviderUnavailable, match="model m is unavailable after 3"):
        await breaker.call(counted)
    assert calls == 0  # failed fast


async def test_breaker_success_resets_the_count() -> None:
    breaker = CircuitBreaker(failure_threshold=2, clock=FakeClock())
    with pytest.raises(ConnectionError):
        await breaker.call(_fail)
    assert await breaker.call(_ok) == "ok"
    with pytest.raises(ConnectionError):
        await breaker.call(_fail)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.failures == 1


async def test_breaker_half_opens_after_cooldown_and_closes_on_success() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=10, clock=clock)
    with pytest.raises(ConnectionError):
        await breaker.call(_fail)
    clock.advance(9.9)
    assert breaker.state is BreakerState.OPEN
    clock.advance(0.2)
    assert breaker.state is BreakerState.HALF_OPEN
    assert await breaker.call(_ok) == "ok"
    assert breaker.state is BreakerState.CLOSED
    assert breaker.failures == 0


async def test_breaker_half_open_allows_one_trial_and_reopens_on_failure() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=10, clock=clock)
    with pytest.raises(ConnectionError):
        await breaker.call(_fail)
    clock.advance(10)

    started = asyncio.Event()
    release = asyncio.Event()

    async def slow_failure() -> None:
        started.set()
        await release.wait()
        raise ConnectionError("still down")

    trial = asyncio.create_task(breaker.call(slow_failure))
    await started.wait()
    with pytest.raises(ProviderUnavailable):  # a second call while the trial runs fails fast
        await breaker.call(_ok)
    release.set()
    with pytest.raises(ConnectionError):
        await trial
    assert breaker.state is BreakerState.OPEN
    clock.advance(5)
    with pytest.raises(ProviderUnavailable, match="next try in 5s"):
        await breaker.call(_ok)
    clock.advance(5)
    assert await breaker.call(_ok) == "ok"
    assert breaker.state is BreakerState.CLOSED


async def test_breaker_cancelled_trial_frees_the_slot() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=1, clock=clock)
    with pytest.raises(ConnectionError):
        await breaker.call(_fail)
    clock.advance(1)

    async def hang() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(breaker.call(hang))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert breaker.state is BreakerState.HALF_OPEN
    assert await breaker.call(_ok) == "ok"
