"""When the model gives no usable answer, the person it was answering on Discord reads the
apology, never an exception, and the message is failed with the reason. Real discord.py over
the loopback fake."""

from __future__ import annotations

from carrier.errors import ProviderError
from carrier.llm.base import ModelRequest
from carrier.llm.failures import FAILURE_NOTICE
from carrier.types import MemoryKind, MemoryStatus
from tests.clients.discord.conftest import Harness


def no_answer(request: ModelRequest) -> str:
    raise ProviderError("model deadline of 45 s reached after 3 attempts: m: timeout, 500, 500")


async def test_model_failure_dm_gets_the_apology(harness: Harness) -> None:
    h = harness
    h.answer = no_answer
    await h.start()
    sent = await h.fake.post(h.ana, "hello there")
    await h.settle()

    assert [s.content for s in h.fake.sent] == [FAILURE_NOTICE]
    assert h.fake.sent[0].payload["message_reference"]["message_id"] == int(sent["id"])
    [inbound] = await h.store.get_memories(
        agent_id=h.runtime.agent_id, kinds=[MemoryKind.MESSAGE], limit=10
    )
    assert inbound.status is MemoryStatus.FAILED
    assert inbound.error is not None and inbound.error.startswith("model deadline of 45 s")


async def test_model_failure_unaddressed_in_a_channel_stays_quiet(harness: Harness) -> None:
    h = harness
    h.answer = no_answer
    h.decision = "RESPOND"  # the bot chose to join in; nobody asked it
    await h.start({"allowedChannels": ["general"]})
    await h.fake.post(h.bob, "anyone up for a jam?", channel=h.channel("general"))
    await h.settle()
    assert h.fake.sent == []
    [inbound] = await h.store.get_memories(
        agent_id=h.runtime.agent_id, kinds=[MemoryKind.MESSAGE], limit=10
    )
    assert inbound.status is MemoryStatus.FAILED  # it did try, and failed


async def test_model_failure_ask_command_gets_the_apology(harness: Harness) -> None:
    h = harness
    h.answer = no_answer
    await h.start()
    await h.fake.slash(h.ana, "ask", channel=h.channel("random"), options={"question": "hi?"})
    await h.fake.wait_until(lambda: len(h.fake.followups) == 1)
    assert [f["content"] for f in h.fake.followups] == [FAILURE_NOTICE]
