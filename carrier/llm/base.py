"""ModelProvider: the one interface the pipeline uses to talk to a language model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, Field

from carrier.types import Usage

__all__ = ["ChatMessage", "ModelProvider", "ModelRequest", "ModelResult", "WrappedProvider"]

Purpose = Literal["response", "should_respond", "facts", "summary", "caption", "other"]


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]]
    """Text, or OpenAI-style content parts (text and image_url) for vision-capable models."""
    name: str | None = None
    tool_call_id: str | None = None
    """For ``role="tool"``: the id of the call this message answers."""
    tool_calls: list[dict[str, Any]] | None = None
    """For ``role="assistant"``: the tool calls it made, in OpenAI format."""


class ModelRequest(BaseModel):
    """One call to a model. ``purpose`` lets providers (and fakes) tell calls apart."""

    messages: list[ChatMessage]
    purpose: Purpose = "response"
    model: str | None = None
    """Overrides the provider's configured model for this call."""
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    """OpenAI-format tool definitions, for tool calling."""
    query: str = ""
    """The text being answered (the inbound message); used by the offline provider."""
    context: dict[str, Any] = Field(default_factory=dict)
    """Extra data for providers that answer without a model (offline): e.g. recalled memories."""


class ModelResult(BaseModel):
    """What a model returned: raw text, tool calls, usage."""

    text: str
    model: str
    usage: Usage = Field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """``[{"id", "name", "arguments": dict}]``."""
    offline: bool = False
    """True when no language model was used (the offline provider)."""
    cached: bool = False


class ModelProvider(ABC):
    """Generates text. Implementations: litellm, offline (no key), test fakes."""

    name: str = "provider"
    offline: bool = False
    deadline: float | None = None
    """Seconds a turn's model calls may take in all, retries and fallbacks included: the runtime
    opens it around each turn (:func:`carrier.llm.deadline.model_deadline`) and providers end
    their calls by then. None: no deadline (fakes, the offline provider)."""

    @abstractmethod
    async def generate(self, request: ModelRequest) -> ModelResult:
        """Return the whole completion. Raises ``ProviderError`` after retries and fallbacks
        (:class:`carrier.llm.failures.ModelFailure` from the providers that retry)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Yield the completion in pieces. The default yields the whole result once; providers
        that can stream override it. After the iterator ends, ``last_result`` holds usage.

        A stream that breaks after yielding text raises
        :class:`carrier.llm.failures.StreamInterrupted`, which can carry on (``resume``)."""
        result = await self.generate(request)
        self.last_result = result
        yield result.text

    last_result: ModelResult | None = None

    async def prepare(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Get ready to answer (import a library, ...) so that the first call, and the turn
        deadline it runs under, does not pay for it. Safe to call twice."""

    async def supports_vision(self) -> bool:
        """Whether the model takes images as input (OpenAI-style ``image_url`` content parts)."""
        return False

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (HTTP sessions). Safe to call twice."""


class WrappedProvider(ModelProvider):
    """A provider in front of another, ``inner`` (the redactor, the budgets): its name, whether
    it is offline, its deadline, its set-up, vision and closing are the inner one's, and so is
    any attribute it does not define itself (``model``, ``requests`` of a fake, ``api_base``...).
    A subclass sets ``self.inner`` and answers :meth:`generate` and :meth:`stream`."""

    inner: ModelProvider

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def offline(self) -> bool:  # type: ignore[override]
        return self.inner.offline

    @property
    def deadline(self) -> float | None:  # type: ignore[override]
        return self.inner.deadline

    async def prepare(self) -> None:
        await self.inner.prepare()

    async def supports_vision(self) -> bool:
        return await self.inner.supports_vision()

    async def aclose(self) -> None:
        await self.inner.aclose()
