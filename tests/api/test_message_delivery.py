"""The API's replies through the outbox: a JSON reply is sent once the response is produced, a
streamed one once its final event is written; the message is then processed."""

from __future__ import annotations

import asyncio

import httpx

from carrier.agents import AgentManager
from carrier.outbox import reply_id
from carrier.types import MemoryStatus
from tests.api.conftest import create_running


async def fate(manager: AgentManager, inbound_id: str) -> tuple[MemoryStatus, MemoryStatus]:
    inbound = await manager.store.get_memory(inbound_id)
    reply = await manager.store.get_memory(reply_id(inbound_id, 0))
    assert inbound is not None and reply is not None
    return inbound.status, reply.status


async def test_delivery_json_reply_is_sent_with_the_response(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    response = await client.post(f"/{agent_id}/message", json={"text": "hello"})
    assert response.status_code == 200, response.text
    inbound_id = response.json()["message_id"]
    assert await fate(manager, inbound_id) == (MemoryStatus.PROCESSED, MemoryStatus.SENT)


async def test_delivery_streamed_reply_is_sent_after_its_final_event(
    client: httpx.AsyncClient, manager: AgentManager
) -> None:
    agent_id = await create_running(client)
    response = await client.post(
        f"/{agent_id}/message", json={"text": "hello"}, headers={"Accept": "text/event-stream"}
    )
    assert response.status_code == 200 and "event: done" in response.text
    done = response.text.rsplit("data: ", 1)[1]
    inbound_id = httpx.Response(200, content=done).json()["message_id"]
    # Marked right after the final event was written, by the task that ran the turn.
    async with asyncio.timeout(5):
        while (await fate(manager, inbound_id))[0] is MemoryStatus.PENDING:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    assert await fate(manager, inbound_id) == (MemoryStatus.PROCESSED, MemoryStatus.SENT)
