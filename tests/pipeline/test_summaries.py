"""Long-term conversation memory: older turns compacted into summaries that are recalled later."""

from __future__ import annotations

from collections import Counter

from carrier.builtin.summaries import ConversationSummarizer
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.llm.offline import OfflineProvider
from carrier.memory.fake import HashEmbedder
from carrier.memory.rights import entity_id_for, forget_entity
from carrier.prompt_data import format_memories
from carrier.runtime import AgentRuntime, TurnResult
from carrier.types import Content, Memory, MemoryKind, Message
from carrier.untrusted import SpeakerLabels
from tests.pipeline.conftest import data_text, dm, group, said, section, system_text, xml


def messages_in(prompt: str) -> list[tuple[str, str]]:
    """(speaker, text) of the messages a summary prompt's data message asks to summarize."""
    return said(section(prompt, "conversation"))


def summarize(prompt: str) -> str:
    """A summarizer model that keeps what matters: statements with a name in them."""
    lines = messages_in(prompt)
    kept = [f"{who} said: {text}" for who, text in lines if "named" in text]
    return " ".join(kept) or f"{len(lines)} messages of chat about sprites and tilesets."


async def turn(runtime: AgentRuntime, message: Message) -> TurnResult:
    """One turn, and the background work it queued (the summaries) done."""
    result = await runtime.handle(message)
    await runtime.settled()
    return result


def model_for(answer: str = "Noted.") -> FunctionModel:
    def fn(request: ModelRequest) -> str:
        if request.purpose == "summary":
            return summarize(data_text(request))
        if request.purpose == "facts":
            return "[]"
        return xml(answer)

    return FunctionModel(fn)


def response_prompts(model: FunctionModel) -> list[str]:
    """The data messages of the response requests (the system message holds no memories)."""
    return [data_text(r) for r in model.requests if r.purpose == "response"]


async def summaries_of(store, agent_id: str, room_id: str | None = None) -> list[Memory]:
    return await store.get_memories(
        agent_id=agent_id, room_id=room_id, kinds=[MemoryKind.SUMMARY], limit=1000
    )


async def test_summary_recalls_a_fact_from_200_messages_ago(make_runtime, store) -> None:
    model = model_for()
    runtime = make_runtime(model)  # 20 recent messages in the prompt, a summary every 20 beyond
    first = await turn(runtime, dm("By the way, my first dog was named Biscuit."))
    for i in range(200):
        await turn(runtime, dm(f"Message {i} about sprites and tilesets."))

    result = await turn(runtime, dm("Do you remember what my first dog was named?"))

    room_id = (await store.get_memory(result.inbound_id)).room_id
    newer = await store.get_memories(
        agent_id=runtime.agent_id, room_id=room_id, kinds=[MemoryKind.MESSAGE], limit=1000
    )
    assert [m.id for m in newer].index(first.inbound_id) > 400  # 400 messages came after it
    summaries = await summaries_of(store, runtime.agent_id, room_id)
    [key] = [s for s in summaries if "Biscuit" in s.content.text]
    assert first.inbound_id in key.content.metadata["covers"]
    assert key.content.text == "Ana said: By the way, my first dog was named Biscuit."

    prompt = response_prompts(model)[-1]
    assert result.trace["state"]["recent"] == 20
    assert key.id in result.trace["state"]["recalled"]
    recalled = section(prompt, "memories")
    assert "<summary " in recalled and key.content.text in recalled
    assert "Biscuit" not in section(prompt, "conversation")  # not in the recent window
    assert "Biscuit" not in system_text([r for r in model.requests if r.purpose == "response"][-1])


async def test_summaries_never_cover_a_message_twice(make_runtime, store) -> None:
    model = model_for()
    runtime = make_runtime(model, recent_messages=6, summary_threshold=5)
    for i in range(40):
        await turn(runtime, dm(f"line {i}"))
    # A new runtime on the same store (a restart) takes up where the summaries end.
    again = make_runtime(model, recent_messages=6, summary_threshold=5)
    for i in range(40, 60):
        await turn(again, dm(f"line {i}"))

    summaries = await summaries_of(store, runtime.agent_id)
    covered = Counter(i for s in summaries for i in s.content.metadata["covers"])
    assert covered and max(covered.values()) == 1
    messages = await store.get_memories(
        agent_id=runtime.agent_id, kinds=[MemoryKind.MESSAGE], limit=1000
    )
    assert len(messages) == 120
    # Everything beyond the window is covered, but for fewer than `threshold` messages.
    uncovered_old = [m for m in messages[6:] if m.id not in covered]
    assert len(uncovered_old) < 5
    assert not any(m.id in covered for m in messages[:6])  # the window is never summarized
    for s in summaries:
        meta = s.content.metadata
        assert meta["messages"] == len(meta["covers"])
        assert s.created_at.isoformat() == meta["to"]
        assert s.embedding is not None and s.embedding_model == runtime.embedder.model_id


async def test_latest_summaries_are_shown_in_the_prompt(make_runtime, store) -> None:
    model = model_for()
    runtime = make_runtime(model, recent_messages=4, summary_threshold=4)
    await turn(runtime, dm("My cat is named Miso."))
    for i in range(9):
        await turn(runtime, dm(f"chat {i}"))
    summaries = await summaries_of(store, runtime.agent_id)
    assert summaries
    await turn(runtime, dm("zzz"))
    prompt = response_prompts(model)[-1]
    shown = section(prompt, "summaries")
    assert summaries[0].content.text in shown
    assert shown.count("<summary span=") == min(len(summaries), 2)


async def test_a_turn_reads_the_latest_summaries_once(make_runtime, store, monkeypatch) -> None:
    model = model_for()
    runtime = make_runtime(model, recent_messages=4, summary_threshold=4)
    for i in range(12):
        await turn(runtime, dm(f"chat {i}"))
    assert await summaries_of(store, runtime.agent_id)
    reads = []
    get_memories = store.get_memories

    async def counted(**kwargs):
        if kwargs.get("kinds") == [MemoryKind.SUMMARY]:
            reads.append(kwargs["limit"])
        return await get_memories(**kwargs)

    monkeypatch.setattr(store, "get_memories", counted)
    result = await turn(runtime, dm("one more"))
    # The provider's read serves the evaluator's due check; none of it was due yet.
    assert reads == [2] and "summaries" not in result.trace
    # An ignored turn has no provider: the due check reads for itself.
    reads.clear()
    await turn(runtime, group("group chatter nobody asked about"))
    assert reads == [1]


async def test_summary_prompt_carries_the_previous_summary(make_runtime) -> None:
    model = model_for()
    runtime = make_runtime(model, recent_messages=2, summary_threshold=3)
    await turn(runtime, dm("My bike is named Rocket."))
    for i in range(6):
        await turn(runtime, dm(f"chat {i}"))
    prompts = [data_text(r) for r in model.requests if r.purpose == "summary"]
    assert len(prompts) >= 2
    assert section(prompts[0], "previous_summary") == "(none)"
    assert section(prompts[1], "previous_summary") == "Ana said: My bike is named Rocket."


async def test_summaries_in_group_rooms_include_ignored_traffic(make_runtime, store) -> None:
    def fn(request: ModelRequest) -> str:
        if request.purpose == "summary":
            return summarize(data_text(request))
        if request.purpose == "should_respond":
            return "IGNORE"
        return "[]"

    runtime = make_runtime(FunctionModel(fn), recent_messages=3, summary_threshold=3)
    for i in range(8):
        await turn(runtime, group(f"chatter {i}", user="bob" if i % 2 else "cy"))
    [summary] = await summaries_of(store, runtime.agent_id)
    assert summary.content.metadata["messages"] == 3  # due at the 6th message
    bob = entity_id_for(runtime.agent_id, "test", "bob")
    cy = entity_id_for(runtime.agent_id, "test", "cy")
    assert summary.content.metadata["entities"] == sorted([bob, cy])


async def test_summary_offline_is_extractive(make_runtime, character, store) -> None:
    embedder = HashEmbedder()
    offline = OfflineProvider(agent_name="Harbor", examples=[("hi", "Ahoy!")], embedder=embedder)
    runtime = make_runtime(offline, recent_messages=2, summary_threshold=2)
    for text in ("I build boats.", "Mostly small ones.", "Wooden.", "ok"):
        await turn(runtime, dm(text))
    oldest = (await summaries_of(store, runtime.agent_id))[-1]
    assert oldest.content.text.startswith("Ana: I build boats.")


async def test_empty_summary_is_not_stored_and_tried_again(make_runtime, store) -> None:
    answers = iter(["", "Ana talked about boats."])

    def fn(request: ModelRequest) -> str:
        if request.purpose == "summary":
            return next(answers)
        return "[]" if request.purpose == "facts" else xml("ok")

    runtime = make_runtime(FunctionModel(fn), recent_messages=2, summary_threshold=2)
    await turn(runtime, dm("one"))
    await turn(runtime, dm("two"))  # 4 messages, 2 beyond the window: due, but empty answer
    assert await summaries_of(store, runtime.agent_id) == []
    await turn(runtime, dm("three"))
    [summary] = await summaries_of(store, runtime.agent_id)
    assert summary.content.text == "Ana talked about boats."
    assert summary.content.metadata["messages"] == 4


async def test_summaries_off_with_threshold_zero(make_runtime, store) -> None:
    model = model_for()
    runtime = make_runtime(model, recent_messages=2, summary_threshold=0)
    for i in range(10):
        await turn(runtime, dm(f"chat {i}"))
    assert await summaries_of(store, runtime.agent_id) == []
    assert "conversation_summary" not in runtime.registry.evaluators


async def test_forget_drops_summaries_and_the_rest_is_summarized_again(make_runtime, store) -> None:
    model = model_for()
    runtime = make_runtime(model, recent_messages=2, summary_threshold=4)
    for i in range(3):
        await turn(
            runtime, group(f"Bob here, my boat is named Wave{i}", user="bob", mentions_agent=True)
        )
        await turn(
            runtime, group(f"Cy here, my kite is named Sky{i}", user="cy", mentions_agent=True)
        )
    before = await summaries_of(store, runtime.agent_id)
    assert before and all("Wave" in s.content.text for s in before)

    bob = entity_id_for(runtime.agent_id, "test", "bob")
    report = await forget_entity(store, agent_id=runtime.agent_id, entity_id=bob)
    assert report.messages == 3 and report.replies == 3 and report.summaries == len(before)
    assert await summaries_of(store, runtime.agent_id) == []

    for i in range(3):
        await turn(runtime, group(f"Cy again {i}", user="cy", mentions_agent=True))
    after = await summaries_of(store, runtime.agent_id)
    assert after and not any("Wave" in s.content.text for s in after)
    assert any("Sky0" in s.content.text for s in after)


def test_format_memories_renders_summaries() -> None:
    summary = Memory(
        agent_id="a",
        room_id="r",
        entity_id="e",
        kind=MemoryKind.SUMMARY,
        content=Content(text="Ana likes boats.", metadata={"messages": 12}),
    )
    labels = SpeakerLabels(agent_id="agent", agent_name="Harbor")
    rendered = format_memories([summary], labels)
    assert rendered.startswith('<summary messages="12" at="')
    assert rendered.endswith('">Ana likes boats.</summary>')


def test_summarizer_rejects_bad_settings() -> None:
    import pytest

    with pytest.raises(ValueError, match="threshold"):
        ConversationSummarizer(threshold=0)
