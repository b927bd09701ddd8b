"""How a model call fails, for the people who see it.

A person talking to a persona never reads an exception: when the model gives no usable answer
(after retries, fallbacks, or at the turn's deadline) the client shows :data:`FAILURE_NOTICE`,
one sentence in no persona's voice, and the operator reads the reason stored with the message
(``model deadline of 45 s reached after 3 attempts: openai/gpt-4o-mini: timeout, 500, timeout``).
A streamed reply that breaks after part of it went out ends with :data:`CUT_MARKER`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from carrier.errors import ProviderError, ProviderUnavailable

__all__ = [
    "CUT_MARKER",
    "FAILURE_CODE",
    "FAILURE_NOTICE",
    "CircuitOpen",
    "MalformedAnswer",
    "ModelFailure",
    "StreamCut",
    "StreamInterrupted",
]

FAILURE_NOTICE = "Sorry — I can't answer right now. Please try again in a moment."
"""What a client shows when a turn got no answer from the model. Not in the persona's voice, and
the same for every failure: the reason is the operator's, stored with the message."""

CUT_MARKER = " …[reply cut off]"
"""Appended to a streamed reply that broke after part of it reached the client; the stored reply
ends with it too (and carries ``metadata["cut"] = True``)."""

FAILURE_CODE = "model_unavailable"
"""The API's error code for a turn the model could not answer."""


class ModelFailure(ProviderError):
    """No usable answer: every attempt of every model failed, or the deadline came first.

    The message is the reason for the operator (no exception names); ``retry_after`` is how long
    the last model asked callers to wait (a 429's ``Retry-After``, an open circuit's cooldown),
    when it said."""

    def __init__(
        self,
        reason: str,
        *,
        attempts: int = 0,
        retry_after: float | None = None,
        deadline_reached: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.retry_after = retry_after
        self.deadline_reached = deadline_reached


class MalformedAnswer(ProviderError):
    """One answer that cannot be used (no choices, no content, a stream with no text). Retried
    like a 500: the next attempt usually answers."""


class StreamCut(ConnectionError):
    """A stream that ended (the connection closed, or ``[DONE]``) before its answer said it was
    finished: no choice carried a finish reason. Retried like a dropped connection; litellm
    raises its own for the same (labelled alike: ``stream cut``)."""


class StreamInterrupted(ModelFailure):
    """A stream broke after it had yielded text.

    Whoever consumed the text decides: if none of it reached a person (it was the model's private
    thought, say) it calls :attr:`resume`, which carries on with the same retries, fallbacks and
    deadline, and discards what it had; if some did, it ends the reply there (with
    :data:`CUT_MARKER`). ``resume`` is None when nothing is left to try."""

    def __init__(
        self,
        reason: str,
        *,
        resume: Callable[[], AsyncIterator[str]] | None,
        attempts: int = 0,
        retry_after: float | None = None,
        deadline_reached: bool = False,
    ) -> None:
        super().__init__(
            reason,
            attempts=attempts,
            retry_after=retry_after,
            deadline_reached=deadline_reached,
        )
        self.resume = resume


class CircuitOpen(ModelFailure, ProviderUnavailable):
    """The model failed so often that calls are paused for a while (its circuit breaker is
    open); ``retry_after`` says for how long."""
