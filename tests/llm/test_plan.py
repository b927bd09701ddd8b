"""AttemptPlan: which model next, how long an attempt may take, and when to stop, on a fake
clock (no waiting)."""

from __future__ import annotations

import pytest

from carrier.llm._plan import AttemptPlan, Slot, Verdict
from carrier.llm.deadline import Deadline
from carrier.llm.failures import ModelFailure
from carrier.llm.resilience import Backoff


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Boom(Exception):
    def __init__(self, label: str, *, transient: bool = True, retry_after: float | None = None):
        super().__init__(label)
        self.verdict = Verdict(transient=transient, label=label, retry_after=retry_after)


def judge(exc: BaseException) -> Verdict:
    assert isinstance(exc, Boom)
    return exc.verdict


def plan(
    clock: Clock,
    models: list[str],
    *,
    deadline: float | None = None,
    timeout: float = 20.0,
    attempts: int = 3,
    waits: list[float] | None = None,
) -> AttemptPlan:
    async def sleep(seconds: float) -> None:
        if waits is not None:
            waits.append(seconds)
        clock.now += seconds

    return AttemptPlan(
        models,
        attempts=attempts,
        timeout=timeout,
        deadline=None if deadline is None else Deadline(clock.now + deadline, deadline),
        backoff=Backoff(base=0.5, cap=8.0, random=lambda: 1.0, sleep=sleep),
        judge=judge,
        clock=clock,
    )


async def test_plan_without_deadline_gives_each_model_its_attempts() -> None:
    clock = Clock()
    p = plan(clock, ["a", "b"], attempts=2)
    seen = []
    while (slot := await p.next()) is not None:
        seen.append(slot)
        p.failed(Boom("500"))
    assert seen == [Slot("a", 20.0), Slot("a", 20.0), Slot("b", 20.0), Slot("b", 20.0)]
    assert p.reason() == "model call failed after 4 attempts: a: 500, 500; b: 500, 500"
    failure = p.failure()
    assert isinstance(failure, ModelFailure) and not failure.deadline_reached
    assert failure.attempts == 4


async def test_plan_shares_the_deadline_so_a_hanging_primary_leaves_time_for_the_fallback() -> None:
    clock = Clock()
    p = plan(clock, ["primary", "fallback"], deadline=45.0, timeout=20.0)
    first = await p.next()
    assert first == Slot("primary", 20.0)
    clock.now += 20.0  # it hung until the timeout
    p.failed(Boom("timeout"))
    second = await p.next()  # what is left of the primary's half, after the backoff
    assert second is not None and second.model == "primary"
    assert second.timeout == pytest.approx(22.5 - 20.0 - 0.5)
    clock.now += second.timeout
    p.failed(Boom("timeout"))
    third = await p.next()  # the primary's share is spent: the fallback gets the rest
    assert third is not None and third.model == "fallback"
    assert third.timeout == 20.0
    assert clock.now == pytest.approx(100.0 + 22.5)


async def test_plan_stops_at_the_deadline_and_says_so() -> None:
    clock = Clock()
    waits: list[float] = []
    p = plan(clock, ["m"], deadline=3.0, timeout=2.0, waits=waits)
    while (slot := await p.next()) is not None:
        clock.now += slot.timeout
        p.failed(Boom("timeout"))
    # 2 s, then a backoff of 0.5 s, then what was left (0.5 s): the backoff fits the deadline.
    assert waits == [0.5]
    assert clock.now <= 100.0 + 3.0
    assert p.deadline_reached
    assert p.reason() == "model deadline of 3 s reached after 2 attempts: m: timeout, timeout"


async def test_plan_shortens_a_backoff_that_would_pass_the_deadline() -> None:
    clock = Clock()
    waits: list[float] = []
    p = plan(clock, ["m"], deadline=2.0, timeout=1.0, attempts=5, waits=waits)
    for _ in range(3):
        assert await p.next() is not None
        p.failed(Boom("500"))
    last = await p.next()
    # Backoffs of 0.5, 1 and 2 s wanted; the third is cut to leave one short attempt (0.25 s).
    assert waits == [0.5, 1.0, 0.25]
    assert last == Slot("m", 0.25)
    assert clock.now + last.timeout == pytest.approx(102.0)


async def test_plan_does_not_wait_a_retry_after_past_the_deadline() -> None:
    clock = Clock()
    waits: list[float] = []
    p = plan(clock, ["a", "b"], deadline=10.0, waits=waits)
    assert (await p.next()) == Slot("a", 5.0)
    p.failed(Boom("429 rate limited", retry_after=30.0))
    slot = await p.next()
    assert slot is not None and slot.model == "b"  # at once, not after 30 s
    assert waits == []


async def test_plan_honours_a_retry_after_that_fits() -> None:
    clock = Clock()
    waits: list[float] = []
    p = plan(clock, ["a"], deadline=10.0, waits=waits)
    await p.next()
    p.failed(Boom("429 rate limited", retry_after=2.0))
    assert (await p.next()) is not None
    assert waits == [2.0]
    assert p.retry_after == 2.0


async def test_plan_moves_on_at_once_after_a_permanent_error() -> None:
    clock = Clock()
    waits: list[float] = []
    p = plan(clock, ["a", "b"], waits=waits)
    await p.next()
    p.failed(Boom("authentication failed", transient=False))
    slot = await p.next()
    assert slot is not None and slot.model == "b" and waits == []


async def test_plan_starts_no_attempt_too_short_to_answer() -> None:
    clock = Clock()
    p = plan(clock, ["m"], deadline=0.2, timeout=4.0)  # min attempt: 1 s
    assert await p.next() is None
    assert p.reason() == "model deadline of 200 ms reached before any attempt"


def test_plan_needs_models_and_attempts() -> None:
    clock = Clock()
    with pytest.raises(ValueError):
        plan(clock, [])
    with pytest.raises(ValueError):
        plan(clock, ["m"], attempts=0)


async def test_plan_spending_its_attempts_and_its_time_together_names_the_deadline() -> None:
    clock = Clock()
    p = plan(clock, ["m"], deadline=1.5, timeout=0.5, attempts=2)
    while (slot := await p.next()) is not None:
        clock.now += slot.timeout  # each attempt hangs to its end
        p.failed(Boom("timeout"))
    # 0.5 s, a backoff of 0.5 s, 0.5 s: the last attempt ended with the deadline.
    assert p.deadline_reached
    assert p.reason() == "model deadline of 1.5 s reached after 2 attempts: m: timeout, timeout"
