"""One model call's schedule of attempts: which model next, how long the attempt may take, how
long to wait before it, and when to stop.

Every model in the chain gets up to ``attempts`` tries, each bounded by the per-attempt
``timeout``. With a deadline, each model may use at most an equal share of the time left when
its turn comes (the last one all of it), so a primary that hangs cannot starve the fallbacks; a
backoff that would run past the model's share is shortened, a ``Retry-After`` that would is not
waited for (the next model is tried at once), and no attempt starts with less than
:attr:`AttemptPlan.min_attempt` seconds left. A permanent error (bad key, bad request) moves on
to the next model straight away.

JSON calls and streams share the plan: a stream that breaks before its text was used resumes
the same plan (see :class:`carrier.llm.failures.StreamInterrupted`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from carrier.llm.deadline import Deadline
from carrier.llm.failures import ModelFailure
from carrier.llm.resilience import Backoff

__all__ = ["AttemptPlan", "Failure", "Slot", "Verdict"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one failed attempt means."""

    transient: bool
    """Worth another try (a 5xx, a timeout, a malformed answer); not a bad key or request."""
    label: str
    """A few words for the operator, no exception names: ``timeout``, ``500``, ``stream cut``."""
    retry_after: float | None = None
    """Seconds the server asked us to wait (a 429's ``Retry-After``)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One attempt to make: at ``model``, taking at most ``timeout`` seconds."""

    model: str
    timeout: float


@dataclass(frozen=True, slots=True)
class Failure:
    model: str
    verdict: Verdict
    error: BaseException


class AttemptPlan:
    """Hands out :class:`Slot` s with :meth:`next` and hears about failures with :meth:`failed`;
    when :meth:`next` returns None, :meth:`failure` says why in one line."""

    def __init__(
        self,
        models: Sequence[str],
        *,
        attempts: int,
        timeout: float,
        deadline: Deadline | None,
        backoff: Backoff,
        judge: Callable[[BaseException], Verdict],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        if not models:
            raise ValueError("a plan needs at least one model")
        self.models = list(models)
        self.attempts = attempts
        self.timeout = timeout
        self.deadline = deadline
        self.backoff = backoff
        self.judge = judge
        self.clock = clock
        self.failures: list[Failure] = []
        self.deadline_reached = False
        self._index = 0
        self._tries = 0
        self._window: float | None = None  # when the current model's share of the time ends
        self._wait = 0.0

    @property
    def min_attempt(self) -> float:
        """The shortest attempt worth starting: a quarter of the timeout, at most a second."""
        return min(1.0, self.timeout / 4)

    @property
    def model(self) -> str | None:
        """The model being tried (None once every model has had its turn)."""
        return self.models[self._index] if self._index < len(self.models) else None

    def remaining(self) -> float:
        """Seconds left before the deadline (infinite without one)."""
        return math.inf if self.deadline is None else self.deadline.at - self.clock()

    async def next(self) -> Slot | None:
        """The next attempt, after waiting the backoff; None when nothing is left to try."""
        if self._wait > 0:
            wait, self._wait = self._wait, 0.0
            await self.backoff.pause(wait)
        while self._index < len(self.models):
            now = self.clock()
            left = self.remaining()
            if left < self.min_attempt:
                self.deadline_reached = True
                return None
            if self._window is None:
                self._window = now + left / (len(self.models) - self._index)
            budget = min(self.timeout, self._window - now)
            if budget < self.min_attempt or self._tries >= self.attempts:
                self._advance()
                continue
            self._tries += 1
            return Slot(self.models[self._index], budget)
        # Every attempt is spent; if the time is too, no more attempts would have fitted either:
        # the deadline is what ended the call.
        self.deadline_reached = self.remaining() < self.min_attempt
        return None

    def failed(self, error: BaseException) -> Verdict:
        """Record that the last slot's attempt failed, and plan what comes next."""
        model = self.model or self.models[-1]
        verdict = self.judge(error)
        self.failures.append(Failure(model, verdict, error))
        if not verdict.transient or self._tries >= self.attempts:
            self._advance()
            return verdict
        window = math.inf if self._window is None else self._window - self.clock()
        room = window - self.min_attempt
        if verdict.retry_after is not None and verdict.retry_after > room:
            log.debug(
                "%s asks to wait %.1fs; not waiting past its share", model, verdict.retry_after
            )
            self._advance()
            return verdict
        wait = max(self.backoff.delay(self._tries - 1), verdict.retry_after or 0.0)
        self._wait = min(wait, max(0.0, room))
        return verdict

    def _advance(self) -> None:
        self._index += 1
        self._tries = 0
        self._window = None
        self._wait = 0.0

    @property
    def last_error(self) -> BaseException | None:
        """The last attempt's error (the cause of :meth:`failure`, for the log)."""
        return self.failures[-1].error if self.failures else None

    @property
    def retry_after(self) -> float | None:
        """What the last failure asked callers to wait, if it said."""
        return self.failures[-1].verdict.retry_after if self.failures else None

    def reason(self, hint: str = "") -> str:
        """Why the call failed, for the operator: the deadline or the attempts, and each
        attempt's outcome by model (``openai/a: timeout, 500; openai/b: 429``)."""
        count = len(self.failures)
        attempts = f"{count} attempt{'s' if count != 1 else ''}"
        by_model: dict[str, list[str]] = {}
        for failure in self.failures:
            by_model.setdefault(failure.model, []).append(failure.verdict.label)
        outcomes = "; ".join(f"{m}: {', '.join(labels)}" for m, labels in by_model.items())
        if self.deadline_reached and self.deadline is not None:
            head = f"model deadline of {_seconds(self.deadline.seconds)} reached"
            text = f"{head} after {attempts}: {outcomes}" if count else f"{head} before any attempt"
        else:
            text = f"model call failed after {attempts}: {outcomes}"
        return text + hint

    def failure(self, hint: str = "") -> ModelFailure:
        """The error to raise when :meth:`next` returned None."""
        return ModelFailure(
            self.reason(hint),
            attempts=len(self.failures),
            retry_after=self.retry_after,
            deadline_reached=self.deadline_reached,
        )


def _seconds(value: float) -> str:
    return f"{value:g} s" if value >= 1 else f"{value * 1000:.0f} ms"
