"""A stream that breaks after text can carry on: through the redactor, which starts afresh for
the resumed stream and keeps redacting it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from carrier.llm.base import ChatMessage, ModelProvider, ModelRequest, ModelResult
from carrier.llm.failures import StreamInterrupted
from carrier.llm.redacting import RedactingProvider
from carrier.safety.redact import Redactor

SECRET = "sk-proj-" + "Zq8" * 16


class BreaksOnce(ModelProvider):
    """Streams a first answer that breaks half-way, then, resumed, a whole second one."""

    name = "breaks-once"

    async def generate(self, request: ModelRequest) -> ModelResult:
        raise AssertionError("not called")

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.last_result = None
        yield "<response><thought>my key is sk-proj-"

        async def second() -> AsyncIterator[str]:
            for piece in ("<text>the key is ", SECRET[:20], SECRET[20:], "</text>"):
                yield piece
            self.last_result = ModelResult(text=f"<text>the key is {SECRET}</text>", model="m")

        raise StreamInterrupted("model call failed after 1 attempt: m: stream cut", resume=second)


async def test_resume_goes_through_the_redactor() -> None:
    model = RedactingProvider(BreaksOnce(), redactor=Redactor())
    request = ModelRequest(messages=[ChatMessage(role="user", content="hi")])
    first: list[str] = []
    with pytest.raises(StreamInterrupted) as info:
        async for piece in model.stream(request):
            first.append(piece)
    assert "sk-proj-" not in "".join(first)  # a secret could still be forming: held back
    assert info.value.resume is not None
    again = "".join([piece async for piece in info.value.resume()])
    assert again == "<text>the key is [redacted]</text>"
    assert model.last_result is not None
    assert SECRET not in model.last_result.text
