"""One message through all five stages, with a fake model, a real SQLite file and a hashing embedder."""

from __future__ import annotations

import asyncio

import pytest

from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel, ScriptedModel
from carrier.runtime import AgentRuntime
from carrier.types import Author, Channel, MemoryStatus, Message, RoomKind
from tests.pipeline.conftest import data_text, dm, said, section, system_text, xml


async def test_runtime_turn_runs_all_five_stages(make_runtime, store) -> None:
    model = FunctionModel(lambda r: xml("Ahoy Ana! Welcome aboard.", thought="a newcomer says hi"))
    runtime: AgentRuntime = make_runtime(model)
    await runtime.start()

    result = await runtime.handle(dm("hello there", msg_id="m1"))

    # 1 message manager: stored, embedded, decided to respond
    inbound = await store.get_memory(result.inbound_id)
    assert inbound is not None
    assert inbound.content.text == "hello there"
    assert inbound.embedding is not None and inbound.embedding_model == runtime.embedder.model_id
    assert result.trace["message"]["should_respond"] is True
    assert result.trace["message"]["reason"] == "direct message"
    # 2 state composer: persona, recent messages, actions
    state = result.trace["state"]
    assert state["recent"] == 1
    assert "REPLY" in state["actions"] and "IGNORE" in state["actions"]
    assert (
        set(state["sections"]) == set()
    )  # built-in providers fill template values, not extra sections
    # 3 generation: the persona and the rules in the system message, the message as data in the
    # user message; the answer was parsed
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]
    system, data = system_text(model.requests[0]), data_text(model.requests[0])
    assert "# You are Harbor" in system and "Harbor hosts a game-dev community." in system
    assert "<response>" in system  # the response format instructions
    assert said(section(data, "conversation")) == [("Ana", "hello there")]
    assert "hello there" not in system and "Ana" not in system
    assert result.trace["generate"]["thought"] == "a newcomer says hi"
    assert result.trace["generate"]["actions"] == ["REPLY"]
    # 4 actions: REPLY ran, one outbound message
    assert result.trace["actions"]["results"] == [
        {"action": "REPLY", "ok": True, "error": None, "data": {}}
    ]
    assert result.trace["actions"]["outbound"] == ["Ahoy Ana! Welcome aboard."]
    # 5 evaluator: reply stored once, linked to the inbound, inbound processed
    assert result.status is MemoryStatus.PROCESSED
    assert [m.content.text for m in result.replies] == ["Ahoy Ana! Welcome aboard."]
    reply = await store.get_memory(result.replies[0].id)
    assert reply is not None and reply.content.in_reply_to == inbound.id
    assert reply.content.thought == "a newcomer says hi"
    assert reply.embedding is None  # made once it is delivered, in the background
    assert reply.content.metadata["model"] == "function"
    assert reply.content.metadata["usage"]["calls"] == 1
    # the outbox: the reply waits pending, and the message with it, until the client sent it
    assert reply.status is MemoryStatus.PENDING
    assert (await store.get_memory(inbound.id)).status is MemoryStatus.PENDING  # type: ignore[union-attr]
    assert await runtime.outbox.deliver(result.replies) == 1
    assert (await store.get_memory(reply.id)).status is MemoryStatus.SENT  # type: ignore[union-attr]
    assert (await store.get_memory(inbound.id)).status is MemoryStatus.PROCESSED  # type: ignore[union-attr]
    room_messages = await store.get_memories(agent_id=runtime.agent_id, room_id=inbound.room_id)
    assert len(room_messages) == 2
    await runtime.settled()
    reply = await store.get_memory(reply.id)
    assert reply is not None and reply.status is MemoryStatus.SENT
    assert reply.embedding is not None and reply.embedding_model == runtime.embedder.model_id


async def test_runtime_turn_killed_midway_keeps_the_message(make_runtime, store, character) -> None:
    entered = asyncio.Event()

    async def hang(request: ModelRequest) -> str:
        entered.set()
        await asyncio.Event().wait()  # never returns: the turn is killed while the model "thinks"
        return ""

    runtime = make_runtime(FunctionModel(hang))
    task = asyncio.create_task(runtime.handle(dm("please remember this", msg_id="m-kill")))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    stored = await store.get_memories(agent_id=runtime.agent_id)
    assert [(m.content.text, m.status) for m in stored] == [
        ("please remember this", MemoryStatus.RECEIVED)
    ]

    # After a restart the interrupted message is visible as failed, with the reason.
    restarted = AgentRuntime(
        character=character, store=store, embedder=runtime.embedder, model=ScriptedModel([])
    )
    assert await restarted.start() == 1
    memory = await store.get_memory(stored[0].id)
    assert memory is not None and memory.status is MemoryStatus.FAILED
    assert memory.error is not None and "interrupted" in memory.error


async def test_runtime_turn_model_error_marks_message_failed(make_runtime, store) -> None:
    def boom(request: ModelRequest) -> str:
        raise RuntimeError("vendor exploded")

    runtime = make_runtime(FunctionModel(boom))
    with pytest.raises(RuntimeError, match="vendor exploded"):
        await runtime.handle(dm("hi", msg_id="m-err"))
    [memory] = await store.get_memories(agent_id=runtime.agent_id)
    assert memory.status is MemoryStatus.FAILED
    assert memory.error == "RuntimeError: vendor exploded"
    # The vector the turn made is kept with the failure, so the message is recalled later.
    assert memory.embedding is not None and memory.embedding_model == runtime.embedder.model_id


async def test_runtime_turn_redelivered_message_is_answered_once(make_runtime, store) -> None:
    model = FunctionModel(lambda r: xml("once"))
    runtime = make_runtime(model)
    first = await runtime.handle(dm("hi", msg_id="same"))
    await runtime.outbox.deliver(first.replies)
    second = await runtime.handle(dm("hi", msg_id="same"))
    assert first.inbound_id == second.inbound_id
    assert len(model.requests) == 1
    assert second.replies == [] and second.reason == "already processed"
    assert await store.count_memories(agent_id=runtime.agent_id) == 2


async def test_runtime_turn_repairs_malformed_output_once(make_runtime) -> None:
    model = ScriptedModel(["<response><thought>x</thought><text>unclosed", xml("fixed")])
    runtime = make_runtime(model)
    result = await runtime.handle(dm("hi"))
    assert [m.content.text for m in result.replies] == ["fixed"]
    assert result.trace["generate"]["repaired"] is True
    repair = model.requests[1].messages
    assert repair[-2].role == "assistant" and "unclosed" in str(repair[-2].content)


async def test_runtime_turn_unrepairable_output_fails_clearly(make_runtime, store) -> None:
    model = ScriptedModel(["<text>broken", "<text>still broken"])
    runtime = make_runtime(model)
    result = await runtime.handle(dm("hi"))
    assert result.status is MemoryStatus.FAILED and result.replies == []
    assert result.reason is not None and "could not be understood" in result.reason
    memory = await store.get_memory(result.inbound_id)
    assert memory is not None and memory.status is MemoryStatus.FAILED


async def test_runtime_turn_streams_only_the_reply_text(make_runtime) -> None:
    model = FunctionModel(
        lambda r: xml("Streaming works fine.", thought="secret plan"), chunk_size=3
    )
    runtime = make_runtime(model)
    pieces: list[str] = []

    async def on_chunk(piece: str) -> None:
        pieces.append(piece)

    result = await runtime.handle(dm("stream please"), on_chunk=on_chunk)
    assert len(pieces) > 2
    assert "".join(pieces) == "Streaming works fine."
    assert result.replies[0].content.text == "Streaming works fine."


async def test_runtime_turn_second_message_sees_the_first(make_runtime) -> None:
    model = FunctionModel(lambda r: xml("noted"))
    runtime = make_runtime(model)
    await runtime.handle(dm("my cat is called Pixel"))
    await runtime.handle(dm("what is my cat called?"))
    conversation = said(section(data_text(model.requests[-1]), "conversation"))
    assert conversation[:2] == [("Ana", "my cat is called Pixel"), ("Harbor (you)", "noted")]


async def test_runtime_turn_recalls_older_memories_semantically(make_runtime, store) -> None:
    model = FunctionModel(lambda r: xml("ok"))
    runtime = make_runtime(model, recent_messages=2, recall_k=3)
    await runtime.handle(dm("my favourite engine is godot for pixel art games"))
    for i in range(3):
        await runtime.handle(dm(f"filler message number {i}"))
    result = await runtime.handle(dm("which engine do I like for pixel art games?"))
    recalled = result.trace["state"]["recalled"]
    texts = [(await store.get_memory(i)).content.text for i in recalled]  # type: ignore[union-attr]
    assert "my favourite engine is godot for pixel art games" in texts
    remembered = said(section(data_text(model.requests[-1]), "memories"))
    assert ("Ana", "my favourite engine is godot for pixel art games") in remembered


async def test_runtime_turn_messages_of_other_agents_are_not_recalled(
    make_runtime, store, character
) -> None:
    other = character.model_copy(update={"name": "Other"})
    model = FunctionModel(lambda r: xml("ok"))
    rt_other = make_runtime(model, character=other)
    await rt_other.handle(dm("the secret word is pelican"))
    runtime = make_runtime(model, recall_k=5)
    result = await runtime.handle(dm("what is the secret word pelican"))
    assert result.trace["state"]["recalled"] == []
    assert runtime.agent_id != rt_other.agent_id
    assert await store.count_memories(agent_id=runtime.agent_id) == 2


async def test_runtime_turn_private_messages_never_recalled_in_public(make_runtime, store) -> None:
    from tests.pipeline.conftest import group

    model = FunctionModel(lambda r: xml("ok"))
    runtime = make_runtime(model, recent_messages=2, recall_k=5)
    await runtime.handle(dm("my secret password hint is the blue pelican", user="ana"))
    await runtime.handle(
        group("we are talking about the blue pelican mascot", user="bo", mentions_agent=True)
    )
    # In a public channel, Ana's DM is not recalled; Bo's public message may be.
    public = await runtime.handle(
        group("what about the blue pelican?", user="ana", mentions_agent=True, channel="other")
    )
    recalled = [(await store.get_memory(i)).content.text for i in public.trace["state"]["recalled"]]  # type: ignore[union-attr]
    assert "my secret password hint is the blue pelican" not in recalled
    assert "we are talking about the blue pelican mascot" in recalled
    # In another private conversation with Ana herself, her own earlier words may come back.
    private = await runtime.handle(
        Message(
            platform="test",
            author=Author(platform_id="ana", name="Ana"),
            channel=Channel(platform_id="api-ana", kind=RoomKind.API),
            text="remind me of the blue pelican hint",
        )
    )
    recalled = [
        (await store.get_memory(i)).content.text for i in private.trace["state"]["recalled"]
    ]  # type: ignore[union-attr]
    assert "my secret password hint is the blue pelican" in recalled


async def test_runtime_turn_images_reach_a_vision_model_as_image_parts(make_runtime) -> None:
    from carrier.types import Attachment

    photo = Attachment(
        url="https://cdn.example/cat.png", title="cat.png", content_type="image/png", size=52_000
    )
    message = dm("what do you think of my cat?")
    message.attachments = [photo]

    seeing = FunctionModel(lambda r: xml("Lovely cat."), vision=True)
    await make_runtime(seeing).handle(message)
    content = seeing.requests[0].messages[1].content  # the data message carries the image
    assert isinstance(content, list)
    assert content[1] == {"type": "image_url", "image_url": {"url": "https://cdn.example/cat.png"}}
    assert isinstance(seeing.requests[0].messages[0].content, str)

    blind = FunctionModel(lambda r: xml("I can't see it, but I bet it's lovely."))
    message.platform_message_id = None
    await make_runtime(blind).handle(message)
    prompt = blind.requests[0].messages[1].content
    assert isinstance(prompt, str)
    assert '<attachment kind="image" name="cat.png" size="51 KB"></attachment>' in prompt


async def test_runtime_observe_stores_without_a_turn_and_never_supersedes(
    make_runtime, store
) -> None:
    from tests.pipeline.conftest import group

    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return xml("Answered.")

    model = FunctionModel(slow)
    runtime = make_runtime(model)
    waiting = asyncio.create_task(runtime.handle(group("@harbor hi", mentions_agent=True)))
    await asyncio.wait_for(entered.wait(), 5)
    chatter = group("chatter meanwhile", user="bob", platform_message_id="p1")
    seen = await runtime.observe(chatter, reason="not asked")
    release.set()
    result = await waiting

    assert [m.content.text for m in result.replies] == ["Answered."]  # not superseded
    assert len(model.requests) == 1  # observing asked the model nothing
    stored = await store.get_memory(seen.id)
    assert stored is not None and stored.status is MemoryStatus.IGNORED
    assert stored.embedding is not None and stored.content.metadata["observed"] == "not asked"
    # Redelivered: stored once, left as it was.
    again = await runtime.observe(chatter, reason="other")
    assert again.id == seen.id and again.content.metadata["observed"] == "not asked"
    assert len(await store.get_memories(agent_id=runtime.agent_id, entity_id=seen.entity_id)) == 1
