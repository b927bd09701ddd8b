"""Turns against model servers that fail: a stream that breaks before the reply began carries
on, one that breaks mid-reply keeps what was sent (marked), a model that gives no usable answer
fails the turn cleanly, and no turn outlives its deadline."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from carrier.llm.failures import CUT_MARKER, FAILURE_NOTICE
from carrier.pipeline.generate import failure_of
from carrier.runtime import AgentRuntime
from carrier.types import MemoryStatus
from tests.faults.conftest import dm, exception_text
from tests.faults.fault_server import FaultMix, FaultServer
from tests.llm.openai_server import FakeOpenAIServer, Reply

pytestmark = pytest.mark.filterwarnings(
    "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem':UserWarning"
)

MakeRuntime = Callable[..., AgentRuntime]


def xml(text: str, thought: str = "thinking") -> str:
    return f"<response><thought>{thought}</thought><actions>REPLY</actions><text>{text}</text></response>"


class Chunks(list[str]):
    async def __call__(self, piece: str) -> None:
        self.append(piece)


async def test_turn_stream_broken_before_the_reply_began_carries_on(
    openai_server: FakeOpenAIServer, make_runtime: MakeRuntime
) -> None:
    openai_server.queue(
        # Broken inside the thought: the person has seen nothing yet.
        Reply(text=xml("Fair winds!", thought="let me think about this one"), break_after=2),
        Reply(text=xml("Fair winds!")),
    )
    runtime = make_runtime(openai_server.base_url)
    await runtime.start()
    chunks = Chunks()
    result = await runtime.handle(dm("hello"), on_chunk=chunks)
    assert result.status is MemoryStatus.PROCESSED
    assert "".join(chunks) == result.text == "Fair winds!"  # sent once, not twice
    assert len(openai_server.requests) == 2
    assert "cut" not in result.replies[0].content.metadata


async def test_turn_stream_cut_mid_reply_keeps_what_was_sent_marked(
    openai_server: FakeOpenAIServer, make_runtime: MakeRuntime, store: object
) -> None:
    openai_server.queue(Reply(text=xml("Hello there my good friend"), break_after=3))
    runtime = make_runtime(openai_server.base_url)
    await runtime.start()
    chunks = Chunks()
    result = await runtime.handle(dm("hello"), on_chunk=chunks)
    assert len(openai_server.requests) == 1  # no retry: it would say the start again
    shown = "".join(chunks)
    assert shown == "Hello there my " + CUT_MARKER.lstrip()
    [reply] = result.replies
    assert reply.content.text == shown and reply.content.metadata["cut"] is True
    assert result.status is MemoryStatus.PROCESSED
    stored = await runtime.store.get_memory(reply.id)
    assert stored is not None and stored.content.text.endswith("[reply cut off]")


@pytest.mark.parametrize("stream", [False, True])
async def test_turn_without_a_usable_answer_fails_cleanly(
    fault_server: FaultServer, make_runtime: MakeRuntime, stream: bool
) -> None:
    fault_server.default = FaultMix.always("no_choices")
    runtime = make_runtime(fault_server.base_url, modelTimeout=0.5, turnDeadline=5)
    await runtime.start()
    chunks = Chunks()
    result = await runtime.handle(dm("hello"), on_chunk=chunks if stream else None)
    assert result.status is MemoryStatus.FAILED and not result.replies and not chunks
    # A stream of chunks without choices ends with no finish: litellm calls it cut.
    label = "stream cut" if stream else "malformed answer: no choices"
    assert result.reason == (
        f"model call failed after 3 attempts: openai/primary: {label}, {label}, {label}"
    )
    failure = failure_of(result)
    assert failure is not None and failure.notice == FAILURE_NOTICE
    assert failure.code == "model_unavailable"
    inbound = await runtime.store.get_memory(result.inbound_id)
    assert inbound is not None and inbound.status is MemoryStatus.FAILED
    assert inbound.error == result.reason
    assert exception_text(result.reason or "") == []


@pytest.mark.parametrize("stream", [False, True])
async def test_turn_ends_at_its_deadline(
    fault_server: FaultServer, make_runtime: MakeRuntime, stream: bool
) -> None:
    fault_server.default = FaultMix.always("hang")
    # Three attempts of 0.4 s cannot fit in 1 s: the deadline, not the attempts, ends the turn.
    runtime = make_runtime(fault_server.base_url, modelTimeout=0.4, turnDeadline=1)
    await runtime.start()
    started = time.monotonic()
    result = await runtime.handle(dm("hello"), on_chunk=Chunks() if stream else None)
    assert time.monotonic() - started < 1 * 3  # an upper bound only
    assert result.status is MemoryStatus.FAILED
    assert result.reason is not None
    assert result.reason.startswith("model deadline of 1 s reached after ")
    assert "openai/primary: timeout" in result.reason


async def test_streaming_turns_reach_a_healthy_fallback(
    fault_server: FaultServer, make_runtime: MakeRuntime
) -> None:
    fault_server.mixes = {"primary": FaultMix.always("500", "cut"), "fallback": FaultMix.healthy()}
    runtime = make_runtime(
        fault_server.base_url, modelFallbacks=["openai/fallback"], modelTimeout=0.5
    )
    await runtime.start()
    for n in range(4):
        chunks = Chunks()
        result = await runtime.handle(dm(f"question {n}"), on_chunk=chunks)
        assert result.status is MemoryStatus.PROCESSED, result.reason
        assert "".join(chunks) == result.text and result.text.startswith("All good here.")
        assert result.replies[0].content.metadata["model"] == "openai/fallback"
    assert fault_server.total(model="fallback", outcome="ok") >= 4


async def test_model_timeout_and_deadline_come_from_settings_or_the_character(
    fault_server: FaultServer, make_runtime: MakeRuntime
) -> None:
    from_settings = make_runtime(fault_server.base_url)
    assert (from_settings.model.timeout, from_settings.model.deadline) == (20.0, 45.0)
    own = make_runtime(fault_server.base_url, modelTimeout=2.5, turnDeadline=9)
    assert (own.model.timeout, own.model.deadline) == (2.5, 9.0)
