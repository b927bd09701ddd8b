"""The client contract's states: what a skipped client reads as, how a tracked state moves, and
that an error shown in a state never carries a secret."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from carrier.clients import (
    FAILED_TO_START,
    Client,
    ClientRefused,
    ClientState,
    ClientStateTracker,
    ClientStatus,
    client_state,
    skipped_state,
    states_of,
)
from carrier.safety.redact import Redactor, using_redactor


class Plain(Client):
    name = "plain"

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Broken(Plain):
    @property
    def state(self) -> ClientState:
        raise RuntimeError("boom")


def test_clients_skipped_reasons_map_to_states() -> None:
    assert skipped_state("DISCORD_API_TOKEN is not set").status is ClientStatus.NOT_CONFIGURED
    refused = ClientRefused("Discord refused the bot token")
    assert str(refused) == f"{FAILED_TO_START}: Discord refused the bot token"
    assert skipped_state(str(refused)).status is ClientStatus.FAILED
    assert skipped_state("failed to start: RuntimeError: x").status is ClientStatus.FAILED
    assert skipped_state("not started in this process (...)").status is ClientStatus.ELSEWHERE
    assert skipped_state("anything", elsewhere=True).status is ClientStatus.ELSEWHERE
    assert [s for s in ClientStatus if s.down] == [ClientStatus.RETRYING, ClientStatus.FAILED]


def test_clients_states_of_started_and_skipped() -> None:
    states = states_of({"plain": Plain(), "broken": Broken()}, {"discord": "no token"})
    assert states["plain"].status is ClientStatus.CONNECTED  # no state of its own: connected
    assert states["broken"].status is ClientStatus.FAILED
    assert "unreadable" in str(states["broken"].last_error)
    assert states["discord"] == ClientState(
        status=ClientStatus.NOT_CONFIGURED, last_error="no token"
    )
    assert client_state(object()).status is ClientStatus.CONNECTED


async def test_clients_tracker_keeps_since_while_retrying_and_wakes_waiters() -> None:
    now = [datetime(2026, 5, 1, 9, 0, tzinfo=UTC)]
    tracker = ClientStateTracker(clock=lambda: now[0])
    waiter = asyncio.create_task(tracker.wait_for(lambda s: s.status is ClientStatus.CONNECTED))
    tracker.retrying("refused", delay=2)
    began = tracker.state.since
    now[0] += timedelta(seconds=5)
    tracker.attempting()
    tracker.retrying(None, delay=4)  # no new error: the last one stays
    state = tracker.state
    assert (state.since, state.attempts, state.last_error) == (began, 2, "refused")
    assert state.next_retry_at == now[0] + timedelta(seconds=4)
    tracker.retrying("again", counted=True)  # already counted by whoever reported it
    assert tracker.state.attempts == 2 and tracker.state.next_retry_at is None
    assert not waiter.done()
    tracker.connected()
    assert (await asyncio.wait_for(waiter, 5)).status is ClientStatus.CONNECTED
    assert tracker.state.since == now[0] and tracker.state.attempts == 0


def test_clients_state_errors_are_redacted_and_short() -> None:
    secret = "sk-live-0123456789abcdefghijklmnop"
    with using_redactor(Redactor([secret])):
        tracker = ClientStateTracker()
        tracker.retrying(f"GET https://bot:{secret}@example.com failed: token {secret}\n" * 40)
        error = tracker.state.last_error
        assert error is not None and secret not in error and "\n" not in error
        assert len(error) <= 300
        assert secret not in str(skipped_state(f"failed to start: {secret}").last_error)
