from __future__ import annotations

import pytest

from carrier.llm.base import ChatMessage, ModelRequest, ModelResult
from carrier.llm.fake import FunctionModel, ScriptedModel, ScriptExhausted
from carrier.types import Usage


def _request(query: str = "hi", purpose: str = "response") -> ModelRequest:
    return ModelRequest(
        messages=[ChatMessage(role="user", content=query)],
        query=query,
        purpose=purpose,  # type: ignore[arg-type]
    )


async def test_function_model_sync_function_and_records_requests() -> None:
    model = FunctionModel(lambda r: f"echo: {r.query}")
    result = await model.generate(_request("one"))
    await model.generate(_request("two"))
    assert result.text == "echo: one"
    assert result.model == "function"
    assert result.usage.calls == 1
    assert [r.query for r in model.requests] == ["one", "two"]
    assert model.offline is False


async def test_function_model_async_function_and_model_result() -> None:
    async def answer(request: ModelRequest) -> ModelResult:
        return ModelResult(text="custom", model="m", usage=Usage(prompt_tokens=3, calls=1))

    result = await FunctionModel(answer).generate(_request())
    assert (result.text, result.model, result.usage.prompt_tokens) == ("custom", "m", 3)


async def test_function_model_rejects_other_return_types() -> None:
    model = FunctionModel(lambda r: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return str or ModelResult"):
        await model.generate(_request())


async def test_function_model_streams_in_chunks() -> None:
    model = FunctionModel(lambda r: "abcdefghij", chunk_size=4)
    chunks = [c async for c in model.stream(_request())]
    assert chunks == ["abcd", "efgh", "ij"]
    assert model.last_result is not None and model.last_result.text == "abcdefghij"
    assert len(model.requests) == 1


def test_function_model_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FunctionModel(lambda r: "", chunk_size=0)


async def test_scripted_model_plays_back_in_order_then_fails_clearly() -> None:
    model = ScriptedModel(["first", "second"])
    assert (await model.generate(_request())).text == "first"
    assert model.remaining == 1
    assert [c async for c in model.stream(_request())] == ["second"]
    with pytest.raises(ScriptExhausted, match=r"2 scripted, this is call 3.*purpose='facts'"):
        await model.generate(_request("who?", purpose="facts"))
    assert len(model.requests) == 3


async def test_scripted_model_raises_scripted_exceptions() -> None:
    model = ScriptedModel([RuntimeError("provider down"), "recovered"])
    with pytest.raises(RuntimeError, match="provider down"):
        await model.generate(_request())
    assert (await model.generate(_request())).text == "recovered"
