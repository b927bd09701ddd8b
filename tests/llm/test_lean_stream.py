"""Streams over the lean path: server-sent events read as they arrive, as litellm reads them,
against a loopback server that writes the event stream byte for byte."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.failures import ModelFailure
from carrier.llm.litellm_provider import LiteLLMProvider, load_litellm
from carrier.llm.resilience import Backoff


class RawSSE:
    """Answers each POST with the next queued body, written in the pieces given (so an event
    may arrive split across reads); records the requests' JSON."""

    def __init__(self) -> None:
        self.bodies: list[tuple[int, list[bytes]]] = []
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        status, pieces = self.bodies.pop(0)
        response = web.StreamResponse(status=status, headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
        await response.write_eof()
        return response


@pytest.fixture
async def sse() -> AsyncIterator[tuple[RawSSE, str]]:
    server = RawSSE()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield server, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


def _event(payload: object, *, crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    return f"data: {json.dumps(payload)}{end}{end}".encode()


def _delta(**delta: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta}]}


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 300}}


def _provider(base_url: str, model: str = "openai/gpt-4o-mini") -> LiteLLMProvider:
    async def no_sleep(seconds: float) -> None:
        pass

    return LiteLLMProvider(
        model, api_base=base_url, api_key="sk-test", attempts=2, backoff=Backoff(sleep=no_sleep)
    )


async def test_a_stream_is_read_as_it_arrives_framing_and_all(
    sse: tuple[RawSSE, str], no_litellm_call: list[dict[str, object]]
) -> None:
    server, url = sse
    whole = b"".join(
        [
            b": a comment the server sends to keep the connection open\n\n",
            _event(_delta(role="assistant")),
            b"event: message\n",
            _event(_delta(content="Hello "), crlf=True),
            b'data:{"choices": [{"index": 0, "delta": {"content": "there."}}]}\n\n',
            _event(FINISH),
            _event(USAGE),
            # no [DONE]: some servers just close once the answer is finished
        ]
    )
    # Split at awkward places: inside an event, inside a line, inside "data:".
    server.bodies.append((200, [whole[:7], whole[7:90], whole[90:91], whole[91:]]))
    provider = _provider(url)
    request = ModelRequest(messages=[ChatMessage(role="user", content="hi")])
    pieces = [piece async for piece in provider.stream(request)]
    assert pieces == ["Hello ", "there."]
    result = provider.last_result
    assert result is not None and result.text == "Hello there."
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (1200, 300)
    litellm = await load_litellm()
    prompt, completion = litellm.cost_per_token(
        model="openai/gpt-4o-mini", prompt_tokens=1200, completion_tokens=300
    )
    assert result.usage.cost_usd == pytest.approx(prompt + completion) and prompt > 0
    [sent] = server.requests
    assert sent["model"] == "gpt-4o-mini" and sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert no_litellm_call == []
    await provider.aclose()


async def test_a_long_event_in_pieces_and_a_last_line_without_newline_are_read(
    sse: tuple[RawSSE, str], no_litellm_call: list[dict[str, object]]
) -> None:
    server, url = sse
    long_text = "word " * 60_000  # 300 KB in one event (a whole answer sent at once)
    event = _event(_delta(content=long_text))
    pieces = [event[i : i + 7000] for i in range(0, len(event), 7000)]
    server.bodies.append((200, [*pieces, _event(FINISH), b"data: [DONE]"]))  # no last newline
    provider = _provider(url, "openai/local-llama")
    request = ModelRequest(messages=[ChatMessage(role="user", content="long")])
    assert "".join([piece async for piece in provider.stream(request)]) == long_text
    assert no_litellm_call == []
    await provider.aclose()


async def test_tool_call_fragments_are_put_together(
    sse: tuple[RawSSE, str], no_litellm_call: list[dict[str, object]]
) -> None:
    server, url = sse

    def call(**fields: object) -> dict[str, object]:
        return _delta(tool_calls=[{"index": 0, **fields}])

    server.bodies.append(
        (
            200,
            [
                _event(_delta(role="assistant")),
                _event(call(id="call_1", function={"name": "weather", "arguments": ""})),
                _event(call(function={"arguments": '{"city": '})),
                _event(call(function={"arguments": '"Lisbon"}'})),
                _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                b"data: [DONE]\n\n",
            ],
        )
    )
    provider = _provider(url)
    request = ModelRequest(messages=[ChatMessage(role="user", content="weather?")])
    assert [piece async for piece in provider.stream(request)] == []
    result = provider.last_result
    assert result is not None and result.text == ""
    assert result.tool_calls == [
        {"id": "call_1", "name": "weather", "arguments": {"city": "Lisbon"}}
    ]
    assert no_litellm_call == []
    await provider.aclose()


@pytest.mark.parametrize(
    ("first", "label"),
    [
        # an error event before any text: the server's own failure, retried
        (
            (200, [_event(_delta(role="assistant")), _event({"error": {"message": "overloaded"}})]),
            "500",
        ),
        # the body ends with no finish reason, [DONE] or not: cut
        ((200, [_event(_delta(role="assistant"))]), "stream cut"),
        ((200, [_event(_delta(role="assistant")), b"data: [DONE]\n\n"]), "stream cut"),
        # an error status before the stream: as for a whole answer
        ((429, [b'{"error": {"message": "slow down"}}']), "429 rate limited"),
        ((200, [b"data: {not json\n\n"]), "malformed answer: not JSON"),
    ],
)
async def test_a_stream_that_fails_before_its_text_is_retried(
    sse: tuple[RawSSE, str],
    no_litellm_call: list[dict[str, object]],
    first: tuple[int, list[bytes]],
    label: str,
) -> None:
    server, url = sse
    good = [_event(_delta(content="second try")), _event(FINISH), b"data: [DONE]\n\n"]
    server.bodies += [first, (200, good)]
    provider = _provider(url, "openai/local-llama")
    request = ModelRequest(messages=[ChatMessage(role="user", content="hi")])
    assert "".join([piece async for piece in provider.stream(request)]) == "second try"
    assert len(server.requests) == 2
    # The same failure twice is the reason the call fails with.
    server.bodies += [first, first]
    with pytest.raises(ModelFailure) as failed:
        _ = [piece async for piece in provider.stream(request)]
    assert str(failed.value).endswith(f"openai/local-llama: {label}, {label}")
    assert no_litellm_call == []
    await provider.aclose()
