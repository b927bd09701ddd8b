"""LiteLLMProvider through litellm's own ``mock_response`` (no HTTP)."""

from __future__ import annotations

import os

import pytest

from carrier.errors import ProviderError, ProviderUnavailable
from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.failures import CircuitOpen, ModelFailure
from carrier.llm.litellm_provider import LiteLLMProvider, load_litellm
from carrier.llm.resilience import Backoff, BreakerState, CircuitBreaker

MODEL = "openai/gpt-4o-mini"

# litellm's streaming types trip a pydantic UserWarning the first time they are built.
litellm_stream_warning = pytest.mark.filterwarnings(
    "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem':UserWarning"
)


def _request(text: str = "hello", **kwargs: object) -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="user", content=text)], **kwargs)  # type: ignore[arg-type]


def _provider(backoff: Backoff, mock: object, **kwargs: object) -> LiteLLMProvider:
    return LiteLLMProvider(MODEL, backoff=backoff, extra={"mock_response": mock}, **kwargs)  # type: ignore[arg-type]


async def test_generate_returns_text_and_usage(no_wait_backoff: Backoff) -> None:
    provider = _provider(no_wait_backoff, "Hello from a mock!")
    result = await provider.generate(_request())
    assert result.text == "Hello from a mock!"
    assert result.model == MODEL
    assert result.usage.calls == 1
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.usage.cost_usd > 0  # gpt-4o-mini is in litellm's bundled price map
    assert not result.offline and not result.cached
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


async def test_unknown_model_costs_nothing(no_wait_backoff: Backoff) -> None:
    provider = LiteLLMProvider(
        "openai/no-such-model-anywhere", backoff=no_wait_backoff, extra={"mock_response": "hi"}
    )
    result = await provider.generate(_request())
    assert result.text == "hi"
    assert result.usage.cost_usd == 0.0


async def test_tool_calls_are_parsed(no_wait_backoff: Backoff) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    provider = LiteLLMProvider(
        MODEL, backoff=no_wait_backoff, extra={"mock_response": "", "mock_tool_calls": [call]}
    )
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    result = await provider.generate(_request(tools=[tool]))
    assert result.tool_calls == [
        {"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]


@litellm_stream_warning
async def test_stream_yields_deltas_and_sets_last_result(no_wait_backoff: Backoff) -> None:
    text = "Streaming works one piece at a time."
    provider = _provider(no_wait_backoff, text)
    deltas = [d async for d in provider.stream(_request())]
    assert len(deltas) > 1
    assert "".join(deltas) == text
    assert provider.last_result is not None
    assert provider.last_result.text == text
    assert provider.last_result.usage.prompt_tokens > 0
    assert provider.last_result.usage.completion_tokens > 0
    assert provider.breaker.state is BreakerState.CLOSED


async def test_transient_errors_are_retried_with_backoff(
    no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    provider = _provider(no_wait_backoff, "litellm.RateLimitError", attempts=3)
    with pytest.raises(ModelFailure) as info:
        await provider.generate(_request())
    message = str(info.value)
    assert message == f"model call failed after 3 attempts: {MODEL}: " + ", ".join(
        ["429 rate limited"] * 3
    )
    assert sleeps == [0.5, 1.0]


async def test_generic_exception_mock_is_a_transient_server_error(
    no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    provider = _provider(no_wait_backoff, Exception("upstream exploded"), attempts=2)
    with pytest.raises(ModelFailure, match=f"2 attempts: {MODEL}: 500, 500$"):
        await provider.generate(_request())
    assert len(sleeps) == 1


@litellm_stream_warning
async def test_stream_failure_before_first_chunk_is_retried(
    no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    provider = _provider(no_wait_backoff, "litellm.InternalServerError", attempts=2)
    with pytest.raises(ProviderError, match="2 attempts"):
        async for _ in provider.stream(_request()):
            pass
    assert len(sleeps) == 1
    assert provider.last_result is None


async def test_auth_error_is_not_retried_and_hides_the_key(
    no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    litellm = await load_litellm()
    error = litellm.AuthenticationError(
        message="Incorrect API key provided: sk-secret-123456",
        llm_provider="openai",
        model="gpt-4o-mini",
    )
    provider = _provider(no_wait_backoff, error, attempts=3, api_key="sk-secret-123456")
    with pytest.raises(ProviderError) as info:
        await provider.generate(_request())
    message = str(info.value)
    assert "after 1 attempt: openai/gpt-4o-mini: authentication failed" in message
    assert "OPENAI_API_KEY" in message
    assert "sk-secret-123456" not in message
    assert sleeps == []


async def test_breaker_opens_after_repeated_failures(no_wait_backoff: Backoff) -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=2, cooldown=60, clock=lambda: now[0])
    provider = _provider(
        no_wait_backoff, "litellm.InternalServerError", attempts=1, breaker=breaker
    )
    for _ in range(2):
        with pytest.raises(ModelFailure) as info:
            await provider.generate(_request())
        assert not isinstance(info.value, ProviderUnavailable)
    with pytest.raises(ProviderUnavailable, match="circuit open") as open_:
        await provider.generate(_request())
    assert isinstance(open_.value, CircuitOpen) and open_.value.retry_after == 60
    with pytest.raises(ProviderUnavailable):
        async for _ in provider.stream(_request()):
            pass
    # After the cooldown one trial goes through; the provider is healthy again.
    now[0] = 60.0
    provider.extra["mock_response"] = "back"
    assert (await provider.generate(_request())).text == "back"
    assert breaker.state is BreakerState.CLOSED


async def test_cache_returns_marked_results_and_evicts_lru(no_wait_backoff: Backoff) -> None:
    provider = _provider(no_wait_backoff, "cached answer", cache_size=2)
    first = await provider.generate(_request("a"))
    again = await provider.generate(_request("a"))
    assert not first.cached
    assert again.cached and again.text == "cached answer"
    assert again.usage.calls == 0 and again.usage.cost_usd == 0
    assert not (await provider.generate(_request("a", temperature=0.9))).cached
    await provider.generate(_request("b"))  # evicts "a" (temperature None) as least recent
    assert not (await provider.generate(_request("a"))).cached


async def test_cache_is_off_by_default(no_wait_backoff: Backoff) -> None:
    provider = _provider(no_wait_backoff, "x")
    await provider.generate(_request())
    assert not (await provider.generate(_request())).cached


@litellm_stream_warning
async def test_stream_serves_and_fills_the_cache(no_wait_backoff: Backoff) -> None:
    provider = _provider(no_wait_backoff, "to be cached", cache_size=4)
    assert "".join([d async for d in provider.stream(_request())]) == "to be cached"
    cached = await provider.generate(_request())
    assert cached.cached and cached.text == "to be cached"
    assert [d async for d in provider.stream(_request())] == ["to be cached"]
    assert provider.last_result is not None and provider.last_result.cached


def test_constructor_rejects_zero_attempts() -> None:
    with pytest.raises(ValueError):
        LiteLLMProvider(MODEL, attempts=0)


async def test_stream_accumulator_joins_tool_call_fragments() -> None:
    from types import SimpleNamespace as NS

    from carrier.llm._litellm import StreamAccumulator

    await load_litellm()

    def chunk(
        content: str | None = None, tools: list[NS] | None = None, usage: NS | None = None
    ) -> NS:
        delta = NS(content=content, tool_calls=tools)
        return NS(choices=[NS(delta=delta)] if usage is None else [], usage=usage)

    def fragment(index: int, args: str, id: str | None = None, name: str | None = None) -> NS:
        return NS(index=index, id=id, function=NS(name=name, arguments=args))

    acc = StreamAccumulator("openai/no-such-model")
    deltas = [
        acc.add(chunk("Let me check. ")),
        acc.add(chunk(tools=[fragment(0, '{"ci', id="call_1", name="get_weather")])),
        acc.add(chunk(tools=[fragment(0, 'ty": "Oslo"}')])),
        acc.add(chunk(tools=[fragment(1, "not json", id="call_2", name="other")])),
        acc.add(chunk(usage=NS(prompt_tokens=7, completion_tokens=3))),
    ]
    assert deltas == ["Let me check. ", "", "", "", ""]
    result = acc.result()
    assert result.text == "Let me check. "
    assert result.tool_calls == [
        {"id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "call_2", "name": "other", "arguments": {"_raw": "not json"}},
    ]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (7, 3)
    assert result.usage.cost_usd == 0.0


async def test_litellm_provider_knows_which_models_see_images() -> None:
    assert await LiteLLMProvider("openai/gpt-4o").supports_vision() is True
    assert await LiteLLMProvider("openai/gpt-3.5-turbo").supports_vision() is False
    assert await LiteLLMProvider("openai/no-such-model-anywhere").supports_vision() is False
