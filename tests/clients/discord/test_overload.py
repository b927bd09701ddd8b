"""An overloaded agent on Discord never refuses a person: the message is stored at once, the bot
shows it is typing, the turn pauses briefly and queues, and the answer comes."""

from __future__ import annotations

import asyncio

from carrier.limits import TurnLimits
from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin
from carrier.types import MemoryKind, MemoryStatus
from tests.clients.discord.conftest import Harness


class Hold:
    """Keeps the turn of a message saying "hold" inside the message stage's gate."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, point: HookPoint, turn: Turn) -> HookResult | None:
        if turn.text == "hold":
            self.inside.set()
            await self.release.wait()
        return None


async def test_overloaded_discord_stores_shows_typing_pauses_and_answers(harness: Harness) -> None:
    h = harness
    runtime = h.runtime
    runtime.gates = TurnLimits(message=1, overload_wait_s=1e-9).gates()
    gate = runtime.gates.get("message")
    assert gate is not None
    hold = Hold()
    runtime.registry.register(Plugin(name="hold", hooks=[(HookPoint.BEFORE_INBOUND, hold)]))
    client = await h.start()
    client.overload_pause = 0.01

    await h.fake.post(h.ana, "warm up")  # a DM: the gate learns how long a turn holds it
    await h.settle()
    assert client.stats.overloaded == 0
    await h.fake.post(h.bob, "hold")
    await hold.inside.wait()  # bob's turn holds the message stage: the agent is overloaded

    sent = await h.fake.post(h.ana, "are you there?")
    await gate.queued(1)  # ana's turn paused, then queued at the gate
    assert client.stats.overloaded == 1
    stored = await h.store.get_memories(
        agent_id=runtime.agent_id, entity_id=h.entity(h.ana), kinds=[MemoryKind.MESSAGE]
    )
    assert stored[0].content.text == "are you there?"  # stored before the wait: nothing lost
    assert stored[0].status is MemoryStatus.RECEIVED
    channel = int(sent["channel_id"])
    await h.fake.wait_until(lambda: h.fake.typing.count(channel) == 2)  # typing, not refused
    assert "echo: are you there?" not in [s.content for s in h.fake.sent]

    hold.release.set()
    await h.settle()
    assert "echo: are you there?" in [s.content for s in h.fake.sent]
    assert "echo: hold" in [s.content for s in h.fake.sent]
    answered = await h.store.get_memory(stored[0].id)
    assert answered is not None and answered.status is MemoryStatus.PROCESSED
