"""The lean model call: litellm's lazy set-up paid at ``prepare`` (offline, nothing sent), a
response's cost read from litellm's own pricing rather than priced a second time, and a plain
``openai/`` chat call sent directly, without litellm."""

from __future__ import annotations

import socket

import pytest

from carrier.llm._direct import HTTPFailure, is_plain_openai_model, result_from_json
from carrier.llm._litellm import judge, response_cost
from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.failures import MalformedAnswer, ModelFailure
from carrier.llm.litellm_provider import LiteLLMProvider, load_litellm
from tests.llm.openai_server import FakeOpenAIServer, Reply


def _request() -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="user", content="hello")])


async def test_prepare_warms_up_without_sending_anything(
    openai_server: FakeOpenAIServer,
) -> None:
    provider = LiteLLMProvider("openai/m", api_base=openai_server.base_url, api_key="sk-test")
    await provider.prepare()
    await provider.prepare()  # once is enough
    assert openai_server.requests == []
    openai_server.queue(Reply(text="after the warm-up"))
    assert (await provider.generate(_request())).text == "after the warm-up"
    assert len(openai_server.requests) == 1


async def test_a_warm_up_that_fails_leaves_the_provider_usable(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = await load_litellm()
    calls: list[dict[str, object]] = []
    real = litellm.acompletion

    async def failing_once(**kwargs: object) -> object:
        calls.append(kwargs)
        if kwargs.get("mock_response") == "ok":
            raise RuntimeError("no warm-up today")
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", failing_once)
    provider = LiteLLMProvider(
        "openai/m", api_base=openai_server.base_url, api_key="sk-test", direct=False
    )
    await provider.prepare()  # logged, not raised
    assert (await provider.generate(_request())).text == "Hello from the loopback model."
    assert [c.get("mock_response") for c in calls] == ["ok", None]


async def test_the_cost_is_litellms_own_figure() -> None:
    litellm = await load_litellm()
    provider = LiteLLMProvider("openai/gpt-4o-mini", extra={"mock_response": "priced"})
    result = await provider.generate(_request())
    assert result.usage.cost_usd > 0  # in litellm's bundled price map
    response = await litellm.acompletion(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "hello"}],
        mock_response="priced",
    )
    assert response_cost(response) == pytest.approx(
        litellm.completion_cost(completion_response=response)
    )


class Bare:
    """A response litellm did not price (no hidden params): priced here, 0 when unpriced."""

    _hidden_params: dict[str, object] = {}


async def test_a_response_without_litellms_price_is_priced_or_free() -> None:
    await load_litellm()
    assert response_cost(Bare()) == 0.0
    unpriced = Bare()
    unpriced._hidden_params = {"response_cost": None}
    assert response_cost(unpriced) == 0.0
    stamped = Bare()
    stamped._hidden_params = {"response_cost": 0.25}
    assert response_cost(stamped) == 0.25


# -- the direct path: a plain openai/ chat call sent without litellm ------------------------------


async def test_a_plain_openai_call_goes_out_directly(
    openai_server: FakeOpenAIServer,
    no_litellm_call: list[dict[str, object]],
) -> None:
    provider = LiteLLMProvider(
        "openai/local-llama",
        api_base=openai_server.base_url + "/",
        api_key="sk-test",
        temperature=0.3,
        max_tokens=40,
        environ={"OPENAI_ORGANIZATION": "org-7"},
    )
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    request = ModelRequest(
        messages=[ChatMessage(role="user", content="hello")], stop=["</x>"], tools=tools
    )
    result = await provider.generate(request)
    assert result.text == "Hello from the loopback model."
    assert result.model == "openai/local-llama"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (12, 6)
    [received] = openai_server.requests
    assert received.authorization == "Bearer sk-test"
    assert received.headers["OpenAI-Organization"] == "org-7"
    assert received.body == {
        "model": "local-llama",
        "messages": [{"role": "user", "content": "hello"}],
        "temperature": 0.3,
        "max_tokens": 40,
        "stop": ["</x>"],
        "tools": tools,
    }
    assert no_litellm_call == []
    await provider.aclose()
    await provider.aclose()  # twice is fine


async def test_the_direct_path_is_priced_by_litellms_table(
    openai_server: FakeOpenAIServer, no_litellm_call: list[dict[str, object]]
) -> None:
    litellm = await load_litellm()
    openai_server.queue(Reply(prompt_tokens=1200, completion_tokens=300))
    provider = LiteLLMProvider(
        "openai/gpt-4o-mini", api_base=openai_server.base_url, api_key="sk-test"
    )
    result = await provider.generate(_request())
    prompt, completion = litellm.cost_per_token(
        model="openai/gpt-4o-mini", prompt_tokens=1200, completion_tokens=300
    )
    assert result.usage.cost_usd == pytest.approx(prompt + completion)
    assert result.usage.cost_usd > 0
    assert no_litellm_call == []


async def test_models_litellm_translates_go_through_litellm() -> None:
    """The o-series and GPT-5 take other parameters than they are given (litellm renames
    ``max_tokens``, drops ``temperature``): litellm sends them."""
    await load_litellm()
    for model in ("openai/o3-mini", "openai/gpt-5-mini", "anthropic/claude-3-5-haiku-latest"):
        assert not is_plain_openai_model(model), model
    for model in ("openai/gpt-4o-mini", "openai/llama3.1:8b", "openai/bench-model"):
        assert is_plain_openai_model(model), model


async def test_a_call_litellm_must_shape_is_not_sent_directly(
    openai_server: FakeOpenAIServer, litellm_models: list[str]
) -> None:
    for provider in (
        LiteLLMProvider("openai/o3-mini", api_base=openai_server.base_url, api_key="sk-test"),
        LiteLLMProvider(
            "openai/m", api_base=openai_server.base_url, api_key="sk-test", direct=False
        ),
    ):
        await provider.generate(_request())
    assert litellm_models == ["openai/o3-mini", "openai/m"]
    assert [r.body["model"] for r in openai_server.requests] == ["o3-mini", "m"]


def test_failures_are_judged_like_litellms() -> None:
    limited = judge(HTTPFailure(429, "slow down", {"Retry-After": "7"}))
    assert (limited.transient, limited.label, limited.retry_after) == (True, "429 rate limited", 7)
    refused = judge(HTTPFailure(401, "Incorrect API key", {}))
    assert (refused.transient, refused.label) == (False, "authentication failed")
    assert judge(HTTPFailure(404, "no such model", {})).label == "404 unknown model"
    assert judge(HTTPFailure(503, "", {})).transient
    assert judge(TimeoutError("no answer")).label == "timeout"
    assert judge(ConnectionError("refused")).label == "connection failed"


async def test_nothing_listening_is_a_connection_failure() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        unused_port = probe.getsockname()[1]
    provider = LiteLLMProvider(
        "openai/m",
        api_base=f"http://127.0.0.1:{unused_port}/v1",
        api_key="sk-test",
        attempts=1,
        deadline=5,
    )
    with pytest.raises(ModelFailure) as info:
        await provider.generate(_request())
    assert str(info.value) == "model call failed after 1 attempt: openai/m: connection failed"
    await provider.aclose()


async def test_an_answer_in_content_parts_is_read_as_text() -> None:
    await load_litellm()  # (for the price)

    def completion(content: object) -> dict[str, object]:
        message = {"role": "assistant", "content": content}
        return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {}}

    parts = [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there."}]
    assert result_from_json("openai/m", completion(parts)).text == "Hello there."
    with pytest.raises(MalformedAnswer, match="no content"):
        result_from_json("openai/m", completion(None))
    with pytest.raises(MalformedAnswer, match="not text"):
        result_from_json("openai/m", completion(42))
    with pytest.raises(MalformedAnswer, match="no choices"):
        result_from_json("openai/m", {"choices": []})
