"""The model boundary: everything a model says passes through the redactor.

A model can be talked into repeating a secret it has seen (a tool's error body, a prompt
injection asking for "the key in base64"), and every reply, stored memory, fact and summary
starts as model output. :class:`RedactingProvider` wraps any :class:`ModelProvider` so its text,
its streamed pieces (held back where a secret could still be forming) and its tool-call
arguments (which become tool requests' bodies) come out redacted. :mod:`carrier.assemble` wraps
every provider it hands to a runtime.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable

from carrier.llm.base import ModelProvider, ModelRequest, ModelResult, WrappedProvider
from carrier.llm.failures import StreamInterrupted
from carrier.safety.redact import Redactor, current_redactor

__all__ = ["RedactingProvider", "redacting"]

WHERE = "model"


class RedactingProvider(WrappedProvider):
    """``inner`` with its output redacted. Attributes it does not define (``model``,
    ``requests`` of a fake, ``api_base``...) are the inner provider's.

    ``redactor`` defaults to the process-wide one, looked up at each call.
    """

    def __init__(self, inner: ModelProvider, *, redactor: Redactor | None = None) -> None:
        self.inner = inner
        self._redactor = redactor
        self.last_result: ModelResult | None = None

    @property
    def redactor(self) -> Redactor:
        return self._redactor or current_redactor()

    async def generate(self, request: ModelRequest) -> ModelResult:
        return self._clean(await self.inner.generate(request), where=WHERE)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        async for piece in self._redacted(lambda: self.inner.stream(request)):
            yield piece

    async def _redacted(self, open_: Callable[[], AsyncIterator[str]]) -> AsyncIterator[str]:
        self.last_result = None
        redactor = self.redactor
        pieces = redactor.stream(where=WHERE)
        try:
            async for piece in open_():
                out = pieces.feed(piece)
                if out:
                    yield out
        except StreamInterrupted as exc:
            # What the redactor held back never went out; a resumed stream starts afresh,
            # through a redactor of its own.
            resume = exc.resume
            if resume is not None:
                exc.resume = lambda: self._redacted(resume)
            raise
        rest = pieces.finish()
        if rest:
            yield rest
        result = self.inner.last_result
        # The text was counted as it streamed; the tool calls are counted here.
        self.last_result = (
            None if result is None else self._clean(result, where=None, calls_where=WHERE)
        )

    def _clean(
        self, result: ModelResult, *, where: str | None, calls_where: str | None = None
    ) -> ModelResult:
        redactor = self.redactor
        text = redactor.redact(result.text, where=where)
        calls = redactor.scrub(result.tool_calls, where=calls_where or where)
        if not text.count and calls == result.tool_calls:
            return result
        return result.model_copy(update={"text": text.text, "tool_calls": calls})


_wrapped: weakref.WeakKeyDictionary[ModelProvider, weakref.ref[RedactingProvider]] = (
    weakref.WeakKeyDictionary()
)


def redacting(provider: ModelProvider) -> ModelProvider:
    """``provider`` behind a :class:`RedactingProvider`: the same wrapper each time for the same
    provider (so swapping a model for itself does not close it), and a wrapper is not wrapped
    again."""
    if isinstance(provider, RedactingProvider):
        return provider
    try:
        ref = _wrapped.get(provider)
    except TypeError:  # an unhashable provider: a wrapper of its own each time
        return RedactingProvider(provider)
    wrapper = ref() if ref is not None else None
    if wrapper is None:
        wrapper = RedactingProvider(provider)
        _wrapped[provider] = weakref.ref(wrapper)
    return wrapper
