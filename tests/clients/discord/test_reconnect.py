"""A Discord connection that comes back: refused at start-up, dropped while running, refused for
good; against the fake Discord's outage switch (503 on the gateway and the REST API).

Backoffs are tiny here; the tests wait for conditions (generous deadlines), never for time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from carrier.clients import ClientRefused, ClientStatus, client_state, skipped_state
from carrier.llm.base import ModelRequest
from carrier.types import MemoryKind, MemoryStatus
from clients.discord import create_client
from clients.discord.client import DiscordClient
from tests.clients.discord.conftest import Harness, xml

FAST = {"reconnect": {"initialSeconds": 0.01, "maxSeconds": 0.05}}
"""Backoff for tests: 10 ms doubling to 50 ms."""

WITHIN = 30.0


async def wait_status(h: Harness, client: DiscordClient, status: ClientStatus) -> None:
    await h.fake.wait_until(lambda: client.state.status is status, within=WITHIN)


async def test_reconnect_outage_at_start_then_connects_without_a_restart(h: Harness) -> None:
    h.fake.refuse()  # an outage: the REST API and the gateway answer 503
    client = await h.start(FAST)  # returns: the first attempt failed, the loop goes on

    first = client.state
    assert first.status is ClientStatus.RETRYING
    assert first.last_error is not None and "Discord is unavailable (HTTP 503)" in first.last_error
    assert first.since is not None
    await h.fake.wait_until(lambda: h.fake.refused["rest"] >= 4, within=WITHIN)
    later = client.state
    assert later.status is ClientStatus.RETRYING and later.attempts >= 3
    assert later.since == first.since  # retrying since the outage began, not since the last try
    assert client.running and not h.fake.gateway.identifies

    h.fake.accept()
    await wait_status(h, client, ClientStatus.CONNECTED)
    assert client.state.last_error is None and client.state.attempts == 0
    assert len(h.fake.gateway.identifies) == 1
    await h.fake.post(h.ana, "hello after the outage")
    await h.settle()
    assert [s.content for s in h.fake.sent] == ["echo: hello after the outage"]


async def test_reconnect_gateway_refused_after_login_is_retried(h: Harness) -> None:
    # The REST API answers, the gateway does not: discord.py's first connection fails in a way
    # that ends its connect (issue #10520); the loop takes over.
    h.fake.refuse(rest=False)
    client = await h.start(FAST)
    assert client.state.status is ClientStatus.RETRYING
    await h.fake.wait_until(lambda: h.fake.refused["gateway"] >= 3, within=WITHIN)
    assert "the Discord gateway refused the connection (HTTP 503)" in str(client.state.last_error)

    h.fake.accept()
    await wait_status(h, client, ClientStatus.CONNECTED)
    await h.fake.post(h.ana, "hi")
    await h.settle()
    assert [s.content for s in h.fake.sent] == ["echo: hi"]


async def test_reconnect_drop_while_running_keeps_the_turn_and_reconnects(h: Harness) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        await release.wait()
        return xml(f"answer to {request.query}")

    h.answer = slow
    client = await h.start(FAST)
    await h.fake.post(h.ana, "a long question")
    await started.wait()

    # The gateway goes away mid-turn and stays away for a few attempts; REST still answers.
    h.fake.refuse(rest=False)
    await h.fake.gateway.drop_all()
    await wait_status(h, client, ClientStatus.RETRYING)
    await h.fake.wait_until(lambda: h.fake.refused["gateway"] >= 3, within=WITHIN)
    release.set()  # the turn ends during the outage: its reply goes out over REST
    await h.fake.wait_until(lambda: len(h.fake.sent) == 1, within=WITHIN)
    assert [s.content for s in h.fake.sent] == ["answer to a long question"]
    assert client.state.status is ClientStatus.RETRYING

    h.fake.accept()
    await wait_status(h, client, ClientStatus.CONNECTED)
    await h.fake.post(h.ana, "still there?")
    await h.settle()
    assert [s.content for s in h.fake.sent][-1] == "answer to still there?"
    stored = await h.store.get_memories(
        agent_id=h.runtime.agent_id, kinds=[MemoryKind.MESSAGE], embeddings=False
    )
    inbound = [m for m in stored if m.entity_id == h.entity(h.ana)]
    assert [m.status for m in inbound] == [MemoryStatus.PROCESSED, MemoryStatus.PROCESSED]


async def test_reconnect_stop_during_backoff_returns_promptly(h: Harness) -> None:
    h.fake.refuse()
    slow_backoff = {"reconnect": {"initialSeconds": 3600, "maxSeconds": 3600}}
    client = await h.start(slow_backoff)
    state = client.state
    assert state.status is ClientStatus.RETRYING and state.since is not None
    assert state.next_retry_at is not None and state.next_retry_at > state.since  # in an hour
    await asyncio.wait_for(client.stop(), timeout=WITHIN)  # not an hour
    assert not client.running and client.bot.is_closed()


async def test_reconnect_refused_token_fails_and_is_not_retried(h: Harness) -> None:
    client = create_client(h.runtime, FAST, {"DISCORD_API_TOKEN": "wrong"})
    h.clients.append(client)
    with pytest.raises(ClientRefused, match="refused the bot token") as info:
        await client.start()
    assert str(info.value).startswith("failed to start: ")
    assert client.state.status is ClientStatus.FAILED and not client.running
    assert "Reset Token" in str(client.state.last_error)
    assert skipped_state(str(info.value)).status is ClientStatus.FAILED  # as the manager shows it


async def test_reconnect_token_refused_while_running_ends_failed(h: Harness) -> None:
    client = await h.start(FAST)
    assert client.state.status is ClientStatus.CONNECTED
    identified = len(h.fake.gateway.identifies)
    for session in list(h.fake.gateway.sessions):  # the token was reset in the portal
        await session.ws.close(code=4004, message=b"Authentication failed.")
    await wait_status(h, client, ClientStatus.FAILED)
    assert "refused the bot token" in str(client.state.last_error)
    await h.fake.wait_until(lambda: not client.running, within=WITHIN)
    assert len(h.fake.gateway.identifies) == identified  # not retried


async def test_reconnect_refused_intents_fail_with_the_fix(h: Harness) -> None:
    h.fake.enabled_intents = 0
    client = create_client(h.runtime, FAST, {"DISCORD_API_TOKEN": h.fake.token})
    h.clients.append(client)
    with pytest.raises(ClientRefused, match="4014"):
        await client.start()
    assert client.state.status is ClientStatus.FAILED and not client.running
    assert len(h.fake.gateway.identifies) == 1  # not retried


def test_reconnect_state_of_a_client_without_one_is_connected() -> None:
    class Plain:
        name = "plain"

    assert client_state(Plain()).status is ClientStatus.CONNECTED


@pytest.fixture
def h(harness: Harness) -> Any:
    return harness
