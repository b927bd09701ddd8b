"""An overloaded agent answers 429 with Retry-After before it stores anything."""

from __future__ import annotations

import asyncio

import httpx

from carrier.agents import AgentManager
from carrier.limits import TurnLimits
from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Plugin
from carrier.types import MemoryKind
from tests.api.conftest import create_running


class Hold:
    """A before_inbound hook that keeps the turn of a message saying "hold" inside the message
    stage's gate until released."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, point: HookPoint, turn: Turn) -> HookResult | None:
        if turn.text == "hold":
            self.inside.set()
            await self.release.wait()
        return None


async def texts(manager: AgentManager, agent_id: str) -> list[str]:
    found = await manager.store.get_memories(
        agent_id=agent_id, kinds=[MemoryKind.MESSAGE], limit=100
    )
    return sorted(m.content.text for m in found)


async def test_an_overloaded_agent_refuses_with_retry_after_and_stores_nothing(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    runtime = manager.runtime(agent_id)
    # One turn at a time in the message stage, and any wait at all counts as too long.
    runtime.gates = TurnLimits(message=1, overload_wait_s=1e-9).gates()
    hold = Hold()
    runtime.registry.register(Plugin(name="hold", hooks=[(HookPoint.BEFORE_INBOUND, hold)]))

    first = await client.post(f"/{agent_id}/message", json={"text": "hello", "user_id": "ana"})
    assert first.status_code == 200, first.text  # the gate learns how long a turn holds it
    held = asyncio.create_task(
        client.post(f"/{agent_id}/message", json={"text": "hold", "user_id": "bo"})
    )
    await hold.inside.wait()
    before = await texts(manager, agent_id)

    refused = await client.post(
        f"/{agent_id}/message", json={"text": "am I answered?", "user_id": "cy"}
    )
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    body = refused.json()
    assert body["error"] == "overloaded"
    assert "nothing was stored" in body["message"] and "send it again after" in body["message"]
    streamed = await client.post(
        f"/{agent_id}/message",
        json={"text": "and streamed?", "user_id": "cy"},
        headers={"Accept": "text/event-stream"},
    )
    assert streamed.status_code == 429
    assert await texts(manager, agent_id) == before  # nothing of either was stored

    hold.release.set()
    assert (await held).status_code == 200
    again = await client.post(
        f"/{agent_id}/message", json={"text": "am I answered?", "user_id": "cy"}
    )
    assert again.status_code == 200, again.text
    assert "am I answered?" in await texts(manager, agent_id)
