"""Turn gates: busy stages admit a few turns at a time, in order of arrival, and the gates say how
loaded the agent is."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from carrier.gates import Gate, Gates
from carrier.limits import TurnLimits
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.settings import load_settings
from carrier.types import MemoryStatus
from tests.pipeline.conftest import dm, xml


class SlowEmbedder(HashEmbedder):
    """Holds every message's embedding until released, counting how many are inside at once."""

    def __init__(self, *, hold_when: int) -> None:
        super().__init__()
        self.active = 0
        self.peak = 0
        self.hold_when = hold_when
        self.full = asyncio.Event()
        self.release = asyncio.Event()

    async def embed_one(self, text: str) -> np.ndarray:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.active >= self.hold_when:
                self.full.set()
            await self.release.wait()
            return await super().embed_one(text)
        finally:
            self.active -= 1


async def test_the_message_gate_bounds_turns_embedding_at_once(make_runtime) -> None:
    embedder = SlowEmbedder(hold_when=2)
    runtime = make_runtime(
        FunctionModel(lambda r: xml("ok")), limits=TurnLimits(message=2), fact_interval=10_000
    )
    runtime.embedder = embedder
    gate = runtime.gates.get("message")
    assert gate is not None
    turns = [asyncio.create_task(runtime.handle(dm("hi", user=f"u{i}"))) for i in range(6)]
    await embedder.full.wait()
    await gate.queued(4)  # the other four wait their turn at the gate, not in the embedder
    assert embedder.active == 2 and gate.holders == 2
    assert runtime.load().waiting == 4
    embedder.release.set()
    results = await asyncio.gather(*turns)
    assert [r.status for r in results] == [MemoryStatus.PROCESSED] * 6
    assert embedder.peak == 2 and gate.peak == 2
    assert all("message" in r.trace["waits_ms"] for r in results)


async def test_a_gate_lets_turns_in_in_order_of_arrival() -> None:
    gate = Gate("state", 1)
    order: list[str] = []
    release = asyncio.Event()

    async def turn(name: str, *, hold: bool = False) -> None:
        async with gate.enter():
            order.append(name)
            if hold:
                await release.wait()

    first = asyncio.create_task(turn("first", hold=True))
    await asyncio.sleep(0)  # let it take the gate
    waiting = []
    for i in range(5):
        waiting.append(asyncio.create_task(turn(f"room {i}")))
        await gate.queued(i + 1)
    release.set()
    late = asyncio.create_task(turn("late"))  # arrives while others still wait: no barging
    await asyncio.gather(first, *waiting, late)
    assert order == ["first", *(f"room {i}" for i in range(5)), "late"]
    assert gate.peak == 1 and gate.holders == 0


async def test_a_turn_cancelled_while_waiting_gives_its_place_on() -> None:
    gate = Gate("state", 1)
    release = asyncio.Event()
    entered: list[str] = []

    async def turn(name: str) -> None:
        async with gate.enter():
            entered.append(name)
            await release.wait()

    holder = asyncio.create_task(turn("holder"))
    await asyncio.sleep(0)
    gone = asyncio.create_task(turn("gone"))
    await gate.queued(1)
    after = asyncio.create_task(turn("after"))
    await gate.queued(2)
    gone.cancel()
    release.set()
    await asyncio.gather(holder, after)
    assert entered == ["holder", "after"] and gate.holders == 0 and gate.waiting == 0


async def test_load_estimates_the_wait_from_the_queue_and_hold_times() -> None:
    gates = Gates({"state": 2, "generate": 0}, limit_s=1e-9)
    gate = gates.get("state")
    assert gate is not None
    assert gates.load().wait_s == 0 and not gates.load().overloaded
    async with gate.enter():
        pass
    assert gate.hold_s > 0  # learnt from the turn that passed
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.enter():
            await release.wait()

    holders = [asyncio.create_task(hold()) for _ in range(5)]
    await gate.queued(3)
    load = gates.load()
    assert load.waiting == 3
    assert load.wait_s == pytest.approx((3 + 1) * gate.hold_s / 2)
    assert load.overloaded  # beyond the (tiny) bound
    release.set()
    await asyncio.gather(*holders)
    assert gates.load().wait_s == 0


def test_gate_sizes_come_from_settings() -> None:
    settings = load_settings(
        {
            "CARRIER_GATE_MESSAGE": "3",
            "CARRIER_MODEL_CONCURRENCY": "5",
            "CARRIER_OVERLOAD_WAIT": "2",
            "CARRIER_BACKGROUND_PATIENCE": "0.5",
        }
    )
    limits = TurnLimits.from_settings(settings)
    gates = limits.gates()
    assert limits.message == 3 and limits.overload_wait_s == 2.0
    assert limits.background_patience_s == 0.5
    assert {n: g.size for n, g in gates.by_name.items()} == {
        "store": 0,
        "message": 3,
        "state": 8,
        "generate": 5,
        "evaluate": 8,
    }
    with pytest.raises(ValueError, match="size must be 0"):
        Gate("x", -1)


def test_a_runtime_built_for_an_agent_takes_its_limits_from_the_settings(tmp_path) -> None:
    from carrier.assemble import build_runtime
    from carrier.character import parse_character
    from carrier.memory.sqlite import SQLiteStore

    settings = load_settings(
        {"CARRIER_DATA_DIR": str(tmp_path), "CARRIER_GATE_STATE": "2", "CARRIER_OVERLOAD_WAIT": "3"}
    )
    runtime, _ = build_runtime(
        parse_character({"name": "Pilot", "bio": ["Guides ships."]}),
        settings=settings,
        store=SQLiteStore(path=tmp_path / "carrier.db"),  # not opened: nothing is read here
        embedder=HashEmbedder(),
        environ={},
        model=FunctionModel(lambda request: xml("ok")),
    )
    assert runtime.gates.by_name["state"].size == 2
    assert runtime.gates.limit_s == 3.0
