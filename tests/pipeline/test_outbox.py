"""Replies as an outbox (``carrier/outbox.py``): a turn's replies stored pending, sent once,
marked sent or failed, the message closed by their fate; what a stopped process left, settled at
the next start. Real SQLite files, the hashing embedder, a fake model."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from carrier.llm.fake import FunctionModel
from carrier.memory.sqlite import SQLiteStore
from carrier.outbox import INTERRUPTED, Outbox, reply_id
from carrier.pipeline.base import HookPoint, Turn
from carrier.plugins import Plugin
from carrier.runtime import AgentRuntime
from carrier.types import Content, Memory, MemoryKind, MemoryStatus, stable_id, utcnow
from tests.pipeline.conftest import dm, xml

AGENT = "agent-1"
PENDING, SENDING, SENT, FAILED = (
    MemoryStatus.PENDING,
    MemoryStatus.SENDING,
    MemoryStatus.SENT,
    MemoryStatus.FAILED,
)
STALE = "not delivered within 120 s; the process stopped"


class Platform:
    """A client's send: records what went out, refuses what it is told to."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.sent: list[str] = []
        self.refuse = refuse or set()

    async def send(self, reply: Memory) -> None:
        if reply.content.text in self.refuse:
            raise RuntimeError("403 Forbidden: Missing Permissions")
        self.sent.append(reply.content.text)


async def left(
    store: SQLiteStore,
    replies: list[tuple[str, MemoryStatus]],
    *,
    platform: str = "discord",
    room: str = "room-1",
    age_s: float = 5.0,
    inbound_status: MemoryStatus = MemoryStatus.PENDING,
) -> str:
    """A turn as a stopped process left it: the message and its replies (text, status), written
    ``age_s`` ago. Returns the message id."""
    at = utcnow() - timedelta(seconds=age_s)
    inbound = await store.add_memory(
        Memory(
            agent_id=AGENT,
            room_id=room,
            entity_id="ana",
            content=Content(text="hello", source=platform),
            status=inbound_status,
            created_at=at,
            updated_at=at,
        )
    )
    for index, (text, status) in enumerate(replies):
        await store.add_memory(
            Memory(
                id=reply_id(inbound.id, index),
                agent_id=AGENT,
                room_id=room,
                entity_id=stable_id(AGENT, "agent"),
                kind=MemoryKind.MESSAGE,
                content=Content(text=text, source=platform, in_reply_to=inbound.id),
                status=status,
                created_at=at,
                updated_at=at,
            )
        )
    return inbound.id


async def statuses(store: SQLiteStore, inbound_id: str) -> tuple[Any, ...]:
    """(message status, message error, [reply statuses])."""
    inbound = await store.get_memory(inbound_id)
    assert inbound is not None
    replies = await Outbox(store, agent_id=AGENT, since=utcnow()).replies_of(inbound_id)
    return inbound.status, inbound.error, [r.status for r in replies]


# -- the live path -----------------------------------------------------------------------------


async def test_outbox_turn_replies_are_sent_once_and_close_the_message(make_runtime, store) -> None:
    runtime: AgentRuntime = make_runtime(FunctionModel(lambda r: xml("Ahoy!")))
    result = await runtime.handle(dm("hi", msg_id="m1"))
    assert await statuses(store, result.inbound_id) == (PENDING, None, [PENDING])

    platform = Platform()
    assert await runtime.outbox.deliver(result.replies, platform.send) == 1
    assert platform.sent == ["Ahoy!"]
    assert await statuses(store, result.inbound_id) == (MemoryStatus.PROCESSED, None, [SENT])
    # A second delivery of the same replies (a duplicate event, a retry) sends nothing.
    assert await runtime.outbox.deliver(result.replies, platform.send) == 0
    assert platform.sent == ["Ahoy!"]


async def test_outbox_a_refused_send_fails_the_reply_and_the_message(store) -> None:
    inbound_id = await left(store, [("one", PENDING), ("two", PENDING)], age_s=0)
    outbox = Outbox(store, agent_id=AGENT, since=utcnow())
    replies = await outbox.replies_of(inbound_id)
    platform = Platform(refuse={"one"})
    with pytest.raises(RuntimeError, match="403"):
        await outbox.deliver(replies, platform.send)
    status, error, reply_states = await statuses(store, inbound_id)
    assert platform.sent == [] and reply_states == [FAILED, FAILED]
    assert status is FAILED and error == "not delivered: 403 Forbidden: Missing Permissions"
    [first, second] = await outbox.replies_of(inbound_id)
    assert first.error == "not delivered: 403 Forbidden: Missing Permissions"
    assert second.error is not None and "an earlier reply was not delivered" in second.error


async def test_outbox_a_delivered_reply_keeps_the_message_processed(store) -> None:
    inbound_id = await left(store, [("one", PENDING), ("two", PENDING)], age_s=0)
    outbox = Outbox(store, agent_id=AGENT, since=utcnow())
    platform = Platform(refuse={"two"})
    with pytest.raises(RuntimeError):
        await outbox.deliver(await outbox.replies_of(inbound_id), platform.send)
    status, error, reply_states = await statuses(store, inbound_id)
    assert platform.sent == ["one"] and reply_states == [SENT, FAILED]
    assert status is MemoryStatus.PROCESSED
    assert (
        error == "1 of 2 replies not delivered: not delivered: 403 Forbidden: Missing Permissions"
    )


async def test_outbox_a_reply_never_delivered_is_not_in_the_next_prompt(make_runtime) -> None:
    seen: list[str] = []

    def answer(request: Any) -> str:
        seen.append("\n".join(m.content for m in request.messages if isinstance(m.content, str)))
        return xml("The answer is 42." if len(seen) == 1 else "Sure.")

    runtime: AgentRuntime = make_runtime(FunctionModel(answer))
    first = await runtime.handle(dm("what is the answer?", msg_id="m1"))
    with pytest.raises(RuntimeError, match="403"):
        await runtime.outbox.deliver(first.replies, Platform(refuse={"The answer is 42."}).send)
    await runtime.handle(dm("hello again", msg_id="m2"))
    assert "what is the answer?" in seen[1]  # what the person said stays in the conversation
    assert "The answer is 42." not in seen[1]  # what never reached them does not


async def test_outbox_a_turn_that_fails_after_storing_its_reply_sends_nothing(
    make_runtime, store
) -> None:
    async def explode(point: HookPoint, turn: Turn) -> None:
        raise RuntimeError("hook broke")

    runtime: AgentRuntime = make_runtime(FunctionModel(lambda r: xml("Ahoy!")))
    runtime.registry.register(Plugin(name="broken", hooks=[(HookPoint.ON_TURN_END, explode)]))
    with pytest.raises(RuntimeError, match="hook broke"):
        await runtime.handle(dm("hi", msg_id="m1"))
    failed = await store.get_memories(agent_id=runtime.agent_id, statuses=[FAILED])
    [inbound] = [m for m in failed if m.content.text == "hi"]
    status, error, reply_states = await statuses(store, inbound.id)
    assert (status, error, reply_states) == (FAILED, "RuntimeError: hook broke", [FAILED])


# -- after a stop ------------------------------------------------------------------------------


async def test_outbox_recover_settles_what_a_stopped_process_left(store) -> None:
    interrupted = await left(store, [], inbound_status=MemoryStatus.RECEIVED)
    to_api = await left(store, [("for the caller", PENDING)], platform="api")
    stale = await left(store, [("too late", PENDING)], age_s=121)
    stored_then_stopped = await left(
        store, [("went out", SENT)], inbound_status=MemoryStatus.RECEIVED
    )
    for_discord = await left(store, [("still fresh", PENDING)])

    outbox = Outbox(store, agent_id=AGENT, since=utcnow())
    report = await outbox.recover()
    try:
        assert (report.found, report.interrupted, report.delivered, report.waiting) == (5, 1, 1, 1)
        assert report.expired == 1
        assert await statuses(store, interrupted) == (FAILED, INTERRUPTED, [])
        # The API's caller is gone; the reply is in the conversation's history, where it reads it.
        assert await statuses(store, to_api) == (MemoryStatus.PROCESSED, None, [SENT])
        assert await statuses(store, stale) == (FAILED, STALE, [FAILED])
        assert await statuses(store, stored_then_stopped) == (MemoryStatus.PROCESSED, None, [SENT])
        # Left for the Discord client, which sends it once connected.
        assert await statuses(store, for_discord) == (PENDING, None, [PENDING])
        discord = Platform()
        assert await outbox.redeliver("discord", discord.send) == 1
        assert await outbox.redeliver("discord", discord.send) == 0  # a reconnect: nothing new
        assert discord.sent == ["still fresh"]
        assert await statuses(store, for_discord) == (MemoryStatus.PROCESSED, None, [SENT])
    finally:
        await outbox.aclose()


async def test_outbox_a_claim_the_stopped_process_held_is_sent_again(store) -> None:
    """Claimed, maybe sent, not recorded: made pending again (Discord's nonce keeps a resend of
    a part that went out from posting twice; see the Discord client's tests)."""
    inbound_id = await left(store, [("claimed", SENDING)])
    outbox = Outbox(store, agent_id=AGENT, since=utcnow())
    await outbox.recover()
    platform = Platform()
    assert await outbox.redeliver("discord", platform.send) == 1
    assert platform.sent == ["claimed"]
    assert await statuses(store, inbound_id) == (MemoryStatus.PROCESSED, None, [SENT])
    await outbox.aclose()


async def test_outbox_two_processes_recovering_at_once_send_each_reply_once(
    store, tmp_path
) -> None:
    for i in range(10):
        await left(store, [(f"reply {i}", PENDING), (f"more {i}", PENDING)])
    async with SQLiteStore(path=tmp_path / "carrier.db") as other:
        platform = Platform()
        outboxes = [Outbox(s, agent_id=AGENT, since=utcnow()) for s in (store, other)]
        await asyncio.gather(*(o.recover() for o in outboxes))
        sent = await asyncio.gather(*(o.redeliver("discord", platform.send) for o in outboxes))
        for outbox in outboxes:
            await outbox.aclose()
    assert sum(sent) == 20
    assert sorted(platform.sent) == sorted(
        [f"reply {i}" for i in range(10)] + [f"more {i}" for i in range(10)]
    )


async def test_outbox_replies_no_client_sent_fail_when_their_window_ends(store) -> None:
    inbound_id = await left(store, [("nobody sends me", PENDING)], age_s=0)
    outbox = Outbox(store, agent_id=AGENT, since=utcnow(), window_s=0.2)
    report = await outbox.recover()
    assert report.waiting == 1
    for _ in range(100):  # the expiry runs by itself once the window has passed
        await asyncio.sleep(0.05)
        if (await statuses(store, inbound_id))[0] is FAILED:
            break
    reason = "not delivered within 0.2 s; the process stopped"
    assert await statuses(store, inbound_id) == (FAILED, reason, [FAILED])
    await outbox.aclose()


async def test_outbox_a_stale_reply_is_not_sent_by_a_late_client(store) -> None:
    inbound_id = await left(store, [("late", PENDING)], age_s=0)
    outbox = Outbox(store, agent_id=AGENT, since=utcnow(), window_s=0.01)
    await asyncio.sleep(0.02)
    platform = Platform()
    assert await outbox.redeliver("discord", platform.send) == 0
    assert platform.sent == []
    status, error, reply_states = await statuses(store, inbound_id)
    assert (status, reply_states) == (FAILED, [FAILED])
    assert error == "not delivered within 0.01 s; the process stopped"


async def test_outbox_redelivery_keeps_to_its_platform_and_rooms(store) -> None:
    """``carrier chat`` prints only its own terminal's replies; Discord sends only Discord's."""
    mine = await left(store, [("for this terminal", PENDING)], platform="cli", room="t-ana")
    theirs = await left(store, [("for another terminal", PENDING)], platform="cli", room="t-bob")
    discord = await left(store, [("for Discord", PENDING)])
    outbox = Outbox(store, agent_id=AGENT, since=utcnow())
    terminal = Platform()
    assert await outbox.redeliver("cli", terminal.send, rooms={"t-ana"}) == 1
    assert terminal.sent == ["for this terminal"]
    assert (await statuses(store, mine))[2] == [SENT]
    assert (await statuses(store, theirs))[2] == [PENDING]
    assert (await statuses(store, discord))[2] == [PENDING]
