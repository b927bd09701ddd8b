"""LiteLLMProvider over real HTTP, against an OpenAI-compatible server on loopback."""

from __future__ import annotations

import pytest

from carrier.errors import ProviderError
from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.failures import ModelFailure, StreamInterrupted
from carrier.llm.litellm_provider import LiteLLMProvider
from carrier.llm.resilience import Backoff, BreakerState
from tests.llm.openai_server import FakeOpenAIServer, Reply

litellm_stream_warning = pytest.mark.filterwarnings(
    "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem':UserWarning"
)
pytestmark = pytest.mark.usefixtures("both_paths")  # each test over both model paths


def _request(text: str = "hello there") -> ModelRequest:
    return ModelRequest(
        messages=[
            ChatMessage(role="system", content="You are Ada."),
            ChatMessage(role="user", content=text),
        ]
    )


def _provider(server: FakeOpenAIServer, backoff: Backoff, **kwargs: object) -> LiteLLMProvider:
    options: dict[str, object] = {
        "api_base": server.base_url,
        "api_key": "sk-test",
        "backoff": backoff,
        "timeout": 10,
    }
    options.update(kwargs)
    return LiteLLMProvider("openai/test-model", **options)  # type: ignore[arg-type]


async def test_generate_over_http(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    openai_server.queue(Reply(text="Hi from loopback!", prompt_tokens=21, completion_tokens=4))
    provider = _provider(openai_server, no_wait_backoff, temperature=0.2, max_tokens=50)
    result = await provider.generate(_request())
    assert result.text == "Hi from loopback!"
    assert result.model == "openai/test-model"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (21, 4)
    assert result.usage.cost_usd == 0.0  # not a priced model
    [received] = openai_server.requests
    assert received.authorization == "Bearer sk-test"
    assert received.body["model"] == "test-model"
    assert received.body["messages"] == [
        {"role": "system", "content": "You are Ada."},
        {"role": "user", "content": "hello there"},
    ]
    assert received.body["temperature"] == 0.2
    assert received.body["max_tokens"] == 50


@litellm_stream_warning
async def test_stream_over_http(openai_server: FakeOpenAIServer, no_wait_backoff: Backoff) -> None:
    openai_server.queue(Reply(text="one two three four", prompt_tokens=9, completion_tokens=4))
    provider = _provider(openai_server, no_wait_backoff)
    deltas = [d async for d in provider.stream(_request())]
    assert deltas == ["one ", "two ", "three ", "four"]
    assert provider.last_result is not None
    assert provider.last_result.text == "one two three four"
    assert (
        provider.last_result.usage.prompt_tokens,
        provider.last_result.usage.completion_tokens,
    ) == (9, 4)
    assert openai_server.requests[0].body["stream"] is True
    assert openai_server.requests[0].body["stream_options"] == {"include_usage": True}


async def test_500_then_200_is_retried(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    openai_server.queue(Reply(status=500), Reply(text="second time lucky"))
    provider = _provider(openai_server, no_wait_backoff)
    result = await provider.generate(_request())
    assert result.text == "second time lucky"
    assert len(openai_server.requests) == 2  # ours, not the openai SDK's hidden retries
    assert sleeps == [0.5]


@litellm_stream_warning
async def test_stream_500_then_200_is_retried(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    openai_server.queue(Reply(status=503), Reply(text="streamed after all"))
    provider = _provider(openai_server, no_wait_backoff)
    assert "".join([d async for d in provider.stream(_request())]) == "streamed after all"
    assert len(openai_server.requests) == 2


async def test_fallback_model_used_after_transient_failures(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    openai_server.failing_models = {"primary"}
    provider = LiteLLMProvider(
        "openai/primary",
        fallbacks=["openai/backup"],
        api_base=openai_server.base_url,
        api_key="sk-test",
        attempts=2,
        backoff=no_wait_backoff,
    )
    result = await provider.generate(_request())
    assert result.model == "openai/backup"
    assert [r.body["model"] for r in openai_server.requests] == ["primary", "primary", "backup"]
    assert provider.breaker.state is BreakerState.CLOSED


async def test_all_models_failing_names_them(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    openai_server.failing_models = {"primary", "backup"}
    provider = LiteLLMProvider(
        "openai/primary",
        fallbacks=["openai/backup"],
        api_base=openai_server.base_url,
        api_key="sk-test",
        attempts=1,
        backoff=no_wait_backoff,
    )
    with pytest.raises(ModelFailure) as info:
        await provider.generate(_request())
    assert (
        str(info.value)
        == "model call failed after 2 attempts: openai/primary: 500; openai/backup: 500"
    )


async def test_auth_error_is_not_retried_and_key_is_hidden(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff, sleeps: list[float]
) -> None:
    openai_server.queue(Reply(status=401))
    provider = _provider(openai_server, no_wait_backoff, api_key="sk-very-secret-key")
    with pytest.raises(ProviderError) as info:
        await provider.generate(_request())
    assert len(openai_server.requests) == 1
    assert sleeps == []
    message = str(info.value)
    assert "openai/test-model: authentication failed" in message
    assert "Error" not in message  # no exception names: the reason is read by people
    assert "sk-very-secret-key" not in message
    assert "OPENAI_API_KEY" in message


@litellm_stream_warning
async def test_stream_broken_mid_way_can_resume_with_the_next_attempt(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    openai_server.queue(
        Reply(text="alpha beta gamma delta", break_after=2), Reply(text="one more time")
    )
    provider = _provider(openai_server, no_wait_backoff)
    received: list[str] = []
    with pytest.raises(StreamInterrupted) as info:
        async for delta in provider.stream(_request()):
            received.append(delta)
    assert received == ["alpha ", "beta "]  # the text that went out is not taken back
    assert len(openai_server.requests) == 1
    assert provider.last_result is None
    assert "openai/test-model: malformed answer: not JSON" in str(info.value)  # a broken event
    # A consumer that has not used the text carries on with the same plan.
    assert info.value.resume is not None
    assert "".join([d async for d in info.value.resume()]) == "one more time"
    assert len(openai_server.requests) == 2
    assert provider.last_result is not None and provider.last_result.text == "one more time"


@litellm_stream_warning
async def test_stream_cut_after_the_role_chunk_is_retried(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    # The first chunk of every stream carries only the role: a cut there is before any text.
    openai_server.queue(Reply(text="never seen", break_after=0), Reply(text="second stream"))
    provider = _provider(openai_server, no_wait_backoff)
    assert "".join([d async for d in provider.stream(_request())]) == "second stream"
    assert len(openai_server.requests) == 2


async def test_local_endpoint_without_a_key(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local server needs no key, but the openai SDK insists on one: the provider supplies a
    # placeholder when no OPENAI_API_KEY is set.
    provider = _provider(openai_server, no_wait_backoff, api_key=None)
    assert (await provider.generate(_request())).text == "Hello from the loopback model."
    # The same through the environment alone: OPENAI_API_BASE and an openai/ model string.
    monkeypatch.setenv("OPENAI_API_BASE", openai_server.base_url)
    provider = LiteLLMProvider("openai/test-model", backoff=no_wait_backoff)
    assert (await provider.generate(_request())).text == "Hello from the loopback model."
    assert [r.authorization for r in openai_server.requests] == ["Bearer sk-no-key-required"] * 2


async def test_response_cache_skips_the_server(
    openai_server: FakeOpenAIServer, no_wait_backoff: Backoff
) -> None:
    provider = _provider(openai_server, no_wait_backoff, cache_size=8)
    first = await provider.generate(_request())
    second = await provider.generate(_request())
    assert second.cached and second.text == first.text
    assert len(openai_server.requests) == 1
