"""LiteLLMProvider against faulty OpenAI-compatible servers on loopback: malformed answers are
transient, every call ends by its deadline, a fallback gets its share of the time, and the
reason a call failed names what happened without an exception's name."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from carrier.llm.base import ChatMessage, ModelRequest
from carrier.llm.deadline import current_deadline, model_deadline
from carrier.llm.failures import ModelFailure
from carrier.llm.litellm_provider import LiteLLMProvider
from carrier.llm.resilience import Backoff
from tests.faults.fault_server import FaultMix, FaultServer
from tests.llm.openai_server import FakeOpenAIServer, Reply

litellm_stream_warning = pytest.mark.filterwarnings(
    "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem':UserWarning"
)
pytestmark = pytest.mark.usefixtures("both_paths")  # each test over both model paths
EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|Traceback")


def _request() -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="user", content="hello")])


def _fast() -> Backoff:
    return Backoff(base=0.01, cap=0.05)


@pytest.fixture
def faults() -> Iterator[FaultServer]:
    server = FaultServer(hang=3.0, retry_after=0.2)
    server.start()
    yield server
    server.stop()


def _on(
    server: FaultServer | FakeOpenAIServer, model: str = "openai/m", **kw: object
) -> LiteLLMProvider:
    options: dict[str, object] = {
        "api_base": server.base_url,
        "api_key": "sk-test",
        "backoff": _fast(),
        "timeout": 0.5,
        "deadline": 3.0,
    }
    options.update(kw)
    return LiteLLMProvider(model, **options)  # type: ignore[arg-type]


async def test_empty_choices_are_retried(openai_server: FakeOpenAIServer) -> None:
    openai_server.queue(Reply(empty_choices=True), Reply(text="second try"))
    result = await _on(openai_server).generate(_request())
    assert result.text == "second try"
    assert len(openai_server.requests) == 2


async def test_empty_content_is_retried(openai_server: FakeOpenAIServer) -> None:
    openai_server.queue(Reply(text=""), Reply(text="now with words"))
    assert (await _on(openai_server).generate(_request())).text == "now with words"


async def test_empty_content_cut_by_max_tokens_is_an_answer(
    openai_server: FakeOpenAIServer,
) -> None:
    # The caller asked for few tokens (a one-token check): nothing to retry.
    openai_server.queue(Reply(text="", finish_reason="length"))
    assert (await _on(openai_server).generate(_request())).text == ""
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("fault", "label"),
    [
        ("no_choices", "malformed answer: no choices"),
        ("bad_json", "malformed answer: not JSON"),
        ("500", "500"),
        ("429", "429 rate limited"),
    ],
)
async def test_a_model_that_keeps_failing_says_what_happened(
    faults: FaultServer, fault: str, label: str
) -> None:
    faults.default = FaultMix.always(fault)
    with pytest.raises(ModelFailure) as info:
        await _on(faults, attempts=2).generate(_request())
    assert str(info.value) == f"model call failed after 2 attempts: openai/m: {label}, {label}"
    assert not EXCEPTION_NAME.search(str(info.value)) and "IndexError" not in str(info.value)
    if fault == "429":
        assert info.value.retry_after == pytest.approx(0.2)


@litellm_stream_warning
@pytest.mark.parametrize("fault", ["cut", "no_choices", "bad_json", "500"])
async def test_a_stream_that_fails_before_its_text_falls_back(
    faults: FaultServer, fault: str
) -> None:
    faults.mixes = {"primary": FaultMix.always(fault), "fallback": FaultMix.healthy()}
    provider = _on(faults, "openai/primary", fallbacks=["openai/fallback"])
    text = "".join([piece async for piece in provider.stream(_request())])
    assert "All good here." in text
    assert provider.last_result is not None and provider.last_result.model == "openai/fallback"
    assert faults.total(model="primary") == 3 and faults.total(model="fallback") == 1


async def test_a_hanging_model_ends_at_the_deadline(faults: FaultServer) -> None:
    faults.default = FaultMix.always("hang")
    provider = _on(faults, timeout=0.3, deadline=0.8, attempts=5)
    started = time.monotonic()
    with pytest.raises(ModelFailure) as info:
        await provider.generate(_request())
    took = time.monotonic() - started
    assert took < 0.8 * 3  # an upper bound only, several times the deadline
    message = str(info.value)
    assert message.startswith("model deadline of 800 ms reached after ")
    assert "openai/m: timeout" in message and info.value.deadline_reached


@litellm_stream_warning
async def test_a_hanging_stream_ends_at_the_deadline(faults: FaultServer) -> None:
    faults.default = FaultMix.always("hang")
    provider = _on(faults, timeout=0.3, deadline=0.8, attempts=5)
    started = time.monotonic()
    with pytest.raises(ModelFailure, match=r"^model deadline of 800 ms reached"):
        async for _ in provider.stream(_request()):
            pass
    assert time.monotonic() - started < 0.8 * 3


async def test_a_hanging_primary_leaves_the_fallback_its_share(faults: FaultServer) -> None:
    faults.mixes = {"primary": FaultMix.always("hang"), "fallback": FaultMix.healthy()}
    # Each attempt may take 5 s, but the primary only gets half of the 2 s deadline.
    provider = _on(faults, "openai/primary", fallbacks=["openai/fallback"], timeout=5, deadline=2)
    started = time.monotonic()
    result = await provider.generate(_request())
    assert result.model == "openai/fallback"
    assert time.monotonic() - started < 2 * 3


async def test_the_turn_deadline_bounds_every_call_inside_it(faults: FaultServer) -> None:
    faults.default = FaultMix.always("hang")
    provider = _on(faults, timeout=0.3, deadline=45, attempts=5)  # its own deadline: far away
    assert current_deadline() is None
    started = time.monotonic()
    with model_deadline(0.7) as deadline, pytest.raises(ModelFailure) as info:
        assert current_deadline() is deadline and deadline is not None
        await provider.generate(_request())
    assert current_deadline() is None
    assert time.monotonic() - started < 0.7 * 3
    assert str(info.value).startswith("model deadline of 700 ms reached")


def test_nested_deadlines_keep_the_earlier() -> None:
    with model_deadline(1.0) as outer:
        with model_deadline(30.0) as inner:
            assert inner is outer
        with model_deadline(0.5) as sooner:
            assert sooner is not None and outer is not None and sooner.at < outer.at
        with model_deadline(None) as none:
            assert none is outer
        assert current_deadline() is outer
