"""The lean model call: litellm's lazy set-up paid at ``prepare`` (offline, nothing sent), and
a response's cost read from litellm's own pricing rather than priced a second time."""

from __future__ import annotations

import pytest

from carrier.llm._litellm import response_cost
from carrier.llm.base import ChatMessage, ModelRequest
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
    provider = LiteLLMProvider("openai/m", api_base=openai_server.base_url, api_key="sk-test")
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
