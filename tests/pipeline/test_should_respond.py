"""The should-respond policy and one-turn-per-room supersession."""

from __future__ import annotations

import asyncio

from carrier.llm.base import ModelRequest
from carrier.llm.failures import ModelFailure
from carrier.llm.fake import FunctionModel
from carrier.types import Author, MemoryStatus, RoomState
from tests.pipeline.conftest import dm, group, xml


def decider(decision: str):  # type: ignore[no-untyped-def]
    def fn(request: ModelRequest) -> str:
        if request.purpose == "should_respond":
            return decision
        return xml("on it")

    return fn


async def test_should_respond_unaddressed_chatter_asks_the_model(make_runtime) -> None:
    model = FunctionModel(decider("IGNORE"))
    runtime = make_runtime(model)
    result = await runtime.handle(group("anyone tried the new shader compiler?"))
    assert [r.purpose for r in model.requests] == ["should_respond"]
    assert result.status is MemoryStatus.IGNORED and result.replies == []
    assert result.reason == "model decided IGNORE"


async def test_should_respond_a_model_that_cannot_decide_leaves_the_room_quiet(
    make_runtime,
) -> None:
    def fn(request: ModelRequest) -> str:
        raise ModelFailure("model deadline of 45 s reached after 3 attempts: test: 500")

    result = await make_runtime(FunctionModel(fn)).handle(group("anyone around?"))
    assert result.status is MemoryStatus.IGNORED and result.replies == []
    assert result.reason is not None
    assert result.reason.startswith("not answered: the model could not decide (model deadline")


async def test_should_respond_model_says_respond(make_runtime) -> None:
    model = FunctionModel(decider("RESPOND"))
    result = await make_runtime(model).handle(group("can someone explain sprite sheets?"))
    assert [r.purpose for r in model.requests] == ["should_respond", "response"]
    assert [m.content.text for m in result.replies] == ["on it"]


async def test_should_respond_mention_reply_and_name_skip_the_model(make_runtime) -> None:
    model = FunctionModel(decider("IGNORE"))
    runtime = make_runtime(model)
    mentioned = await runtime.handle(group("<@123> help", mentions_agent=True))
    replied = await runtime.handle(group("thanks!", replies_to_agent=True, channel="other"))
    named = await runtime.handle(group("hey harbor, what's up?", channel="third"))
    assert [r.purpose for r in model.requests] == ["response"] * 3
    assert mentioned.trace["message"]["reason"] == "mentioned"
    assert replied.trace["message"]["reason"] == "reply to the agent"
    assert named.trace["message"]["reason"] == "name mentioned"


async def test_should_respond_muted_room_ignored_without_model(make_runtime, store) -> None:
    model = FunctionModel(decider("RESPOND"))
    runtime = make_runtime(model)
    first = await runtime.handle(group("hello all", mentions_agent=True))
    room_id = (await store.get_memory(first.inbound_id)).room_id  # type: ignore[union-attr]
    await store.set_room_state(runtime.agent_id, room_id, RoomState.MUTED)
    calls = len(model.requests)
    result = await runtime.handle(group("so anyway"))
    assert len(model.requests) == calls
    assert result.reason == "room is muted"
    # ...but a mention still gets through
    assert (await runtime.handle(group("<@1> you there?", mentions_agent=True))).replies


async def test_should_respond_followed_room_answers_everything(make_runtime, store) -> None:
    model = FunctionModel(decider("IGNORE"))
    runtime = make_runtime(model)
    first = await runtime.handle(group("hi", mentions_agent=True))
    room_id = (await store.get_memory(first.inbound_id)).room_id  # type: ignore[union-attr]
    await store.set_room_state(runtime.agent_id, room_id, RoomState.FOLLOWED)
    result = await runtime.handle(group("random chatter"))
    assert result.trace["message"]["reason"] == "room is followed" and result.replies


async def test_should_respond_ignore_list(make_runtime) -> None:
    model = FunctionModel(decider("RESPOND"))
    runtime = make_runtime(model, ignore=["spambot"])
    message = group("buy coins", mentions_agent=False)
    message.author = Author(platform_id="99", name="SpamBot")
    result = await runtime.handle(message)
    assert result.reason == "sender is on the ignore list" and model.requests == []


async def test_should_respond_direct_messages_always_answered(make_runtime) -> None:
    model = FunctionModel(decider("IGNORE"))
    result = await make_runtime(model).handle(dm("psst"))
    assert result.replies and [r.purpose for r in model.requests] == ["response"]


async def test_supersede_newer_message_replaces_a_waiting_one(make_runtime, store) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        if request.query == "first":
            await release.wait()
        return xml(f"answer to {request.query}")

    runtime = make_runtime(FunctionModel(slow))
    first = asyncio.create_task(runtime.handle(dm("first")))
    await asyncio.wait_for(started.wait(), 5)
    second = asyncio.create_task(runtime.handle(dm("second")))
    third = asyncio.create_task(runtime.handle(dm("third")))
    await asyncio.sleep(0.05)  # let both reach the room lock
    release.set()
    r1, r2, r3 = await asyncio.gather(first, second, third)
    assert [m.content.text for m in r1.replies] == ["answer to first"]
    assert r2.status is MemoryStatus.SUPERSEDED and r2.replies == []
    assert [m.content.text for m in r3.replies] == ["answer to third"]
    stored = await store.get_memory(r2.inbound_id)
    assert stored is not None and stored.status is MemoryStatus.SUPERSEDED
    assert runtime._rooms == {}  # room slots are released


async def test_supersede_other_rooms_run_concurrently(make_runtime) -> None:
    gate = asyncio.Event()
    inside = 0
    peak = 0

    async def fn(request: ModelRequest) -> str:
        nonlocal inside, peak
        inside += 1
        peak = max(peak, inside)
        await gate.wait()
        inside -= 1
        return xml("ok")

    runtime = make_runtime(FunctionModel(fn))
    tasks = [asyncio.create_task(runtime.handle(dm("hi", user=f"user{i}"))) for i in range(3)]
    for _ in range(50):
        if peak == 3:
            break
        await asyncio.sleep(0.01)
    gate.set()
    results = await asyncio.gather(*tasks)
    assert peak == 3
    assert all(r.replies for r in results)
