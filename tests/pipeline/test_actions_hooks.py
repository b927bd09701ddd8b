"""Built-in actions, hooks at the named points, plugins and the fact-extraction evaluator."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable

import pytest

from carrier.builtin.actions import MAX_CONTINUES
from carrier.errors import ConfigError
from carrier.llm.base import ModelRequest
from carrier.llm.failures import ModelFailure
from carrier.llm.fake import FunctionModel, ScriptedModel
from carrier.persona import example_pairs, sample_persona
from carrier.pipeline.base import HookPoint, HookResult, Turn
from carrier.plugins import Action, ActionResult, ContextProvider, Evaluator, Plugin, ProviderOutput
from carrier.types import MemoryKind, MemoryStatus, RoomState
from tests.pipeline.conftest import data_text, dm, group, said, section, system_text, xml


async def test_action_ignore_sends_nothing(make_runtime) -> None:
    result = await make_runtime(ScriptedModel([xml("", actions="IGNORE")])).handle(dm("bye"))
    assert result.replies == [] and result.status is MemoryStatus.IGNORED


async def test_action_mute_room_sets_state_and_still_answers(make_runtime, store) -> None:
    model = ScriptedModel([xml("Going quiet now.", actions="REPLY, mute_room")])
    runtime = make_runtime(model)
    result = await runtime.handle(group("harbor please be quiet", mentions_agent=True))
    memory = await store.get_memory(result.inbound_id)
    assert memory is not None
    assert await store.get_room_state(runtime.agent_id, memory.room_id) is RoomState.MUTED
    assert [m.content.text for m in result.replies] == ["Going quiet now."]


async def test_action_room_actions_not_available_in_dms(make_runtime) -> None:
    model = ScriptedModel([xml("ok", actions="MUTE_ROOM")])
    result = await make_runtime(model).handle(dm("be quiet"))
    assert "MUTE_ROOM" not in result.trace["state"]["actions"]
    assert result.actions == [
        {"action": "MUTE_ROOM", "ok": False, "error": "not available in this turn", "data": {}}
    ]
    assert [m.content.text for m in result.replies] == ["ok"]


async def test_action_continue_is_bounded(make_runtime) -> None:
    answers = iter(f"part {i}" for i in range(10))
    model = FunctionModel(lambda r: xml(next(answers), actions="CONTINUE"))
    result = await make_runtime(model).handle(dm("tell me a long story"))
    assert [m.content.text for m in result.replies] == [
        f"part {i}" for i in range(1 + MAX_CONTINUES)
    ]


async def test_action_continue_the_model_cannot_give_keeps_what_was_written(make_runtime) -> None:
    def answer(request: ModelRequest) -> str:
        if len(model.requests) == 1:
            return xml("part 0", actions="CONTINUE")
        raise ModelFailure("model deadline of 45 s reached after 3 attempts: test: timeout")

    model = FunctionModel(answer)
    result = await make_runtime(model).handle(dm("tell me a long story"))
    assert [m.content.text for m in result.replies] == ["part 0"]
    [continued] = [a for a in result.actions if a["action"] == "CONTINUE"]
    assert "deadline" in continued["data"]["stopped"]


async def test_action_unknown_is_recorded_and_reply_still_sent(make_runtime) -> None:
    result = await make_runtime(ScriptedModel([xml("hi", actions="DANCE")])).handle(dm("hi"))
    assert result.actions[0]["error"] == "unknown action"
    assert [m.content.text for m in result.replies] == ["hi"]


async def test_hook_before_inbound_reject_ends_turn(make_runtime, store) -> None:
    async def block(point: HookPoint, turn: Turn) -> HookResult | None:
        return HookResult.reject("spam") if "spam" in turn.text else None

    model = ScriptedModel([])
    runtime = make_runtime(
        model, plugins=[Plugin(name="mod", hooks=[(HookPoint.BEFORE_INBOUND, block)])]
    )
    result = await runtime.handle(dm("spam spam"))
    assert result.reason == "rejected by hook: spam" and model.requests == []
    memory = await store.get_memory(result.inbound_id)
    assert (
        memory is not None
        and memory.status is MemoryStatus.IGNORED
        and memory.content.text == "spam spam"
    )


async def test_hook_modify_points_change_text(make_runtime) -> None:
    seen: list[str] = []

    async def hook(point: HookPoint, turn: Turn) -> HookResult | None:
        seen.append(point.value)
        if point is HookPoint.BEFORE_INBOUND:
            return HookResult.modify(turn.text.replace("darn", "****"))
        if point is HookPoint.BEFORE_OUTBOUND:
            assert turn.current_reply is not None
            return HookResult.modify(turn.current_reply.text.replace("@everyone", "everyone"))
        return None

    model = FunctionModel(lambda r: xml("hey @everyone look"))
    plugin = Plugin(name="mod", hooks=[(p, hook) for p in HookPoint])
    result = await make_runtime(model, plugins=[plugin]).handle(dm("darn it"))
    assert said(section(data_text(model.requests[0]), "conversation")) == [("Ana", "**** it")]
    assert [m.content.text for m in result.replies] == ["hey everyone look"]
    assert seen == [
        "before_inbound",
        "before_generate",
        "before_action",
        "before_outbound",
        "on_turn_end",
    ]


async def test_hook_before_outbound_reject_drops_reply(make_runtime) -> None:
    async def hook(point: HookPoint, turn: Turn) -> HookResult:
        return HookResult.reject("unsafe")

    plugin = Plugin(name="safety", hooks=[(HookPoint.BEFORE_OUTBOUND, hook)])
    result = await make_runtime(ScriptedModel([xml("bad words")]), plugins=[plugin]).handle(
        dm("hi")
    )
    assert result.replies == [] and result.status is MemoryStatus.PROCESSED


async def test_plugin_registers_all_or_nothing_and_unloads(make_runtime) -> None:
    async def wave(turn: Turn) -> ActionResult:
        return ActionResult(action="WAVE", replies=["*waves*"])

    async def weather(turn: Turn) -> ProviderOutput:
        return ProviderOutput(text="## Weather\nSunny in the harbor.")

    plugin = Plugin(
        name="fun",
        actions=[Action(name="WAVE", description="wave", handler=wave)],
        providers=[ContextProvider(name="weather", provide=weather)],
    )
    model = FunctionModel(lambda r: xml("hello", actions="REPLY,WAVE"))
    runtime = make_runtime(model, plugins=[plugin])
    result = await runtime.handle(dm("hi"))
    assert [m.content.text for m in result.replies] == ["hello", "*waves*"]
    # A plugin's section is data (it may carry anything the plugin fetched), not instructions.
    request = model.requests[0]
    assert "Sunny in the harbor." in section(data_text(request), "context")
    assert "Sunny" not in system_text(request)

    clash = Plugin(
        name="clash",
        actions=[Action(name="FRESH", description="x", handler=wave)],
        evaluators=[Evaluator(name="fact_extraction", description="dup", handler=None)],  # type: ignore[arg-type]
    )
    with pytest.raises(ConfigError, match="evaluator 'fact_extraction' already registered"):
        runtime.registry.register(clash)
    assert runtime.registry.find_action("FRESH") is None  # nothing of it was added

    runtime.registry.unregister("fun")
    assert (
        runtime.registry.find_action("WAVE") is None and "weather" not in runtime.registry.providers
    )


async def test_context_providers_that_call_out_run_at_once_and_local_ones_in_turn(
    make_runtime,
) -> None:
    """Providers that call out run concurrently, each in a task of its own; local ones run one
    after another in the state stage's task. A failure (even one raised before any await)
    leaves out its own section only, and the sections keep the providers' positions."""
    first_asked, second_asked = asyncio.Event(), asyncio.Event()
    tasks: dict[str, asyncio.Task[object] | None] = {}

    def remote(name: str, mine: asyncio.Event, other: asyncio.Event, at: int) -> ContextProvider:
        async def provide(turn: Turn) -> ProviderOutput:
            tasks[name] = asyncio.current_task()
            mine.set()
            await asyncio.wait_for(other.wait(), 10)  # each waits for the other to have begun
            return ProviderOutput(text=f"{name} says hi")

        return ContextProvider(name=name, provide=provide, position=at)

    def local(name: str, at: int, fails: bool = False) -> ContextProvider:
        async def provide(turn: Turn) -> ProviderOutput:
            tasks[name] = asyncio.current_task()
            if fails:
                raise RuntimeError("no notes today")
            return ProviderOutput(text=f"{name} says hi")

        return ContextProvider(name=name, provide=provide, position=at, local=True)

    def fails_at_once(turn: Turn) -> Awaitable[ProviderOutput]:
        raise RuntimeError("no source today")

    plugin = Plugin(
        name="sources",
        providers=[
            ContextProvider(name="eager", provide=fails_at_once, position=80),
            remote("first", first_asked, second_asked, at=70),
            remote("second", second_asked, first_asked, at=60),
            local("notes", at=50),
            local("broken", at=55, fails=True),
        ],
    )
    model = FunctionModel(lambda r: xml("hello"))
    result = await make_runtime(model, plugins=[plugin]).handle(dm("hi"))
    assert [m.content.text for m in result.replies] == ["hello"]
    assert result.trace["state"]["sections"] == ["first", "notes", "second"]
    data = data_text(model.requests[0])
    assert data.index("notes says hi") < data.index("second says hi") < data.index("first says hi")
    assert "no notes today" not in data and "no source today" not in data
    # The local ones ran in one task (the stage's), each of the others in its own.
    assert tasks["notes"] is tasks["broken"]
    assert len({id(tasks["notes"]), id(tasks["first"]), id(tasks["second"])}) == 3


async def test_fact_extraction_stores_facts_once(make_runtime, store) -> None:
    def fn(request: ModelRequest) -> str:
        if request.purpose == "facts":
            return '```json\n[{"claim": "Ana works on a roguelike", "about": "Ana", "type": "fact"}]\n```'
        return xml("cool")

    runtime = make_runtime(FunctionModel(fn), fact_interval=2)
    for text in ("hi", "I am making a roguelike", "it has pixel art", "and a dog"):
        await runtime.handle(dm(text))
        await runtime.settled()
    facts = await store.get_memories(agent_id=runtime.agent_id, kinds=[MemoryKind.FACT])
    assert [f.content.text for f in facts] == [
        "Ana works on a roguelike"
    ]  # second extraction deduplicated
    entity = await store.get_entity(facts[0].entity_id)
    assert entity is not None and "Ana" in entity.names
    result = await runtime.handle(dm("what do you know about me?"))
    facts = section(data_text(runtime.model.requests[-1]), "facts")  # type: ignore[attr-defined]
    assert "<fact>Ana works on a roguelike</fact>" in facts
    assert result.replies


def test_persona_sample_is_seeded(character) -> None:
    a = sample_persona(character, random.Random(3))
    b = sample_persona(character, random.Random(3))
    assert a == b
    assert a["agentName"] == "Harbor"
    assert "Harbor: Ahoy! Welcome aboard." in a["messageExamples"]
    assert "{{user1}}" not in a["messageExamples"]


def test_persona_example_pairs(character) -> None:
    assert example_pairs(character) == [
        ("hello", "Ahoy! Welcome aboard."),
        ("who are you?", "I'm Harbor, the host of this server."),
    ]
