"""Model fakes shipped with the package, for tests that need a model but no network.

``FunctionModel`` answers with a function of the request; ``ScriptedModel`` plays back a list.
Both record every request in ``.requests``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from carrier.llm.base import ModelProvider, ModelRequest, ModelResult
from carrier.types import Usage

__all__ = ["FunctionModel", "ScriptExhausted", "ScriptedModel"]

ModelFunction = Callable[[ModelRequest], str | ModelResult | Awaitable[str | ModelResult]]
"""What :class:`FunctionModel` calls: request → answer text or result, sync or async."""


class FunctionModel(ModelProvider):
    """A model whose answer is ``fn(request)`` (sync or async, ``str`` or ``ModelResult``).

    ``stream()`` yields the answer in pieces of ``chunk_size`` characters. Each call counts as
    one model call in ``usage`` with no tokens, unless ``prices`` gives the model a price:
    ``{model: (USD per prompt token, USD per completion token)}`` (the model is the request's
    ``model`` or this one's), and then tokens are counted as a quarter of the characters, the
    way litellm's cost map would price a real call (which tests cannot reach).
    """

    name = "function"

    def __init__(
        self,
        fn: ModelFunction,
        *,
        chunk_size: int = 8,
        model: str = "function",
        vision: bool = False,
        prices: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        self.fn = fn
        self.chunk_size = chunk_size
        self.model = model
        self.requests: list[ModelRequest] = []
        self.vision = vision
        self.prices = dict(prices or {})
        self.last_result: ModelResult | None = None

    async def supports_vision(self) -> bool:
        return self.vision

    async def generate(self, request: ModelRequest) -> ModelResult:
        self.requests.append(request)
        answer: object = self.fn(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ModelResult):
            return answer
        if not isinstance(answer, str):
            raise TypeError(
                f"{type(self).__name__} function must return str or ModelResult, "
                f"got {type(answer).__name__}"
            )
        return ModelResult(
            text=answer, model=request.model or self.model, usage=self._usage(request, answer)
        )

    def _usage(self, request: ModelRequest, answer: str) -> Usage:
        price = self.prices.get(request.model or self.model)
        if price is None:
            return Usage(calls=1)
        said = "".join(m.content if isinstance(m.content, str) else "" for m in request.messages)
        prompt, completion = max(1, len(said) // 4), max(1, len(answer) // 4)
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost_usd=prompt * price[0] + completion * price[1],
            calls=1,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.last_result = None
        result = await self.generate(request)
        for start in range(0, len(result.text), self.chunk_size):
            yield result.text[start : start + self.chunk_size]
        self.last_result = result


class ScriptExhausted(AssertionError):
    """A :class:`ScriptedModel` was called more times than it has answers (a test bug)."""


class ScriptedModel(FunctionModel):
    """Returns ``responses`` in order, one per call; an exception in the list is raised instead.

    Calling it once more than scripted raises :class:`ScriptExhausted`, naming the call.
    """

    name = "scripted"

    def __init__(
        self,
        responses: Sequence[str | ModelResult | BaseException],
        *,
        chunk_size: int = 8,
        model: str = "scripted",
    ) -> None:
        super().__init__(self._next, chunk_size=chunk_size, model=model)
        self.responses = list(responses)
        self._index = 0

    @property
    def remaining(self) -> int:
        """How many scripted answers are left."""
        return len(self.responses) - self._index

    def _next(self, request: ModelRequest) -> str | ModelResult:
        if self._index >= len(self.responses):
            raise ScriptExhausted(
                f"ScriptedModel ran out of responses: {len(self.responses)} scripted, "
                f"this is call {self._index + 1} (purpose={request.purpose!r}, "
                f"query={request.query[:80]!r})"
            )
        item = self.responses[self._index]
        self._index += 1
        if isinstance(item, BaseException):
            raise item
        return item
