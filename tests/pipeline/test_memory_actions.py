"""The memory tools: the model searches, writes and reads the agent's own memories, and nothing
of another agent's or of another person's private conversations."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from carrier.character import Character
from carrier.llm.base import ModelRequest, ModelResult
from carrier.llm.fake import FunctionModel
from carrier.memory.rights import entity_id_for
from carrier.runtime import AgentRuntime
from carrier.types import MemoryKind, MemoryStatus, stable_id
from tests.pipeline.conftest import CHARACTER, data_text, dm, group, section, tool_output, xml

Call = tuple[str, dict[str, Any]]


def tool_model(calls: Callable[[str], list[Call]], outputs: list[dict[str, Any]]) -> FunctionModel:
    """Answers a message by calling ``calls(message)`` tools first (if any), then replies; the
    tool outputs it was given are appended to ``outputs`` (parsed JSON, or the error text)."""

    def fn(request: ModelRequest) -> str | ModelResult:
        if request.purpose != "response":
            return "[]"
        tool_messages = [m for m in request.messages if m.role == "tool"]
        if not tool_messages:
            wanted = calls(request.query)
            if wanted:
                return ModelResult(
                    text="",
                    model="fake",
                    tool_calls=[
                        {"id": f"c{i}", "name": name, "arguments": args}
                        for i, (name, args) in enumerate(wanted)
                    ],
                )
            return xml("ok")
        for message in tool_messages:
            body = tool_output(message.content)
            outputs.append(json.loads(body) if body.startswith("{") else {"error": body})
        return xml("done")

    return FunctionModel(fn)


def by_prefix(**table: list[Call]) -> Callable[[str], list[Call]]:
    """Tool calls chosen by the message's first word."""
    return lambda text: table.get(text.split()[0].lower(), [])


async def test_memory_tools_are_opt_in(make_runtime) -> None:
    model = FunctionModel(lambda r: xml("hi"))
    await make_runtime(model).handle(dm("hello"))
    assert model.requests[-1].tools is None
    await make_runtime(model, memory_tools=True).handle(dm("hello"))
    names = [t["function"]["name"] for t in model.requests[-1].tools or []]
    assert names == ["memory_search", "memory_write", "memory_read"]


async def test_memory_search_then_read(make_runtime) -> None:
    outputs: list[dict[str, Any]] = []
    calls = by_prefix(
        search=[("memory_search", {"query": "what is my cat called", "k": 3})],
    )
    runtime = make_runtime(tool_model(calls, outputs), memory_tools=True)
    told = await runtime.handle(dm("My cat is called Miso and she loves boxes."))
    await runtime.handle(dm("search please"))
    results = outputs[-1]["results"]
    assert results[0]["id"] == told.inbound_id
    assert results[0]["text"] == "My cat is called Miso and she loves boxes."
    assert results[0]["speaker"] == "Ana" and results[0]["kind"] == "message"
    assert len(results) <= 3 and all(r["id"] != told.inbound_id for r in results[1:])

    read = by_prefix(read=[("memory_read", {"id": told.inbound_id})])
    runtime2 = make_runtime(tool_model(read, outputs), memory_tools=True)
    result = await runtime2.handle(dm("read it"))
    assert outputs[-1]["id"] == told.inbound_id
    assert outputs[-1]["text"] == "My cat is called Miso and she loves boxes."
    assert result.actions[0]["action"] == "MEMORY_READ" and result.actions[0]["ok"] is True


async def test_memory_write_about_sender_and_room(make_runtime, store) -> None:
    outputs: list[dict[str, Any]] = []
    calls = by_prefix(
        remember=[("memory_write", {"text": "Ana prefers green tea."})],
        note=[("memory_write", {"text": "This room plans a jam in May.", "about": "room"})],
    )
    model = tool_model(calls, outputs)
    runtime = make_runtime(model, memory_tools=True)
    first = await runtime.handle(dm("remember that I like green tea"))
    stored_id = outputs[-1]["stored"]
    fact = await store.get_memory(stored_id)
    assert fact is not None and fact.kind is MemoryKind.FACT
    assert fact.agent_id == runtime.agent_id
    assert fact.entity_id == entity_id_for(runtime.agent_id, "test", "ana")
    assert fact.content.metadata == {
        "type": "note",
        "about": "sender",
        "from_message": first.inbound_id,
    }
    assert fact.embedding is not None and fact.status is MemoryStatus.STORED

    await runtime.handle(dm("remember it again"))
    assert outputs[-1] == {"already_known": stored_id, "text": "Ana prefers green tea."}

    await runtime.handle(dm("note for the room"))
    note = await store.get_memory(outputs[-1]["stored"])
    assert note is not None and note.entity_id == stable_id(runtime.agent_id, "agent")

    await runtime.handle(dm("what do you know?"))
    prompt = data_text([r for r in model.requests if r.purpose == "response"][-1])
    assert '<facts about="Ana">\n<fact>Ana prefers green tea.</fact>\n</facts>' in prompt
    assert section(prompt, "notes") == "\n<note>This room plans a jam in May.</note>\n"


async def test_memory_tool_bad_arguments_reach_the_model(make_runtime) -> None:
    outputs: list[dict[str, Any]] = []
    calls = by_prefix(
        bad=[
            ("memory_search", {"query": "x", "k": 500}),
            ("memory_write", {"text": ""}),
            ("memory_read", {}),
        ]
    )
    result = await make_runtime(tool_model(calls, outputs), memory_tools=True).handle(dm("bad"))
    assert [o["error"] for o in outputs] == [
        "error: invalid arguments at k: 500 is greater than the maximum of 20",
        "error: invalid arguments at text: '' should be non-empty",
        "error: invalid arguments at arguments: 'id' is a required property",
    ]
    assert [a["ok"] for a in result.actions[:3]] == [False, False, False]
    assert result.replies[0].content.text == "done"


async def test_memory_tools_never_cross_agents(make_runtime, store) -> None:
    other_character = Character.model_validate({**CHARACTER, "name": "Beacon"})
    outputs: list[dict[str, Any]] = []
    calls = by_prefix(
        search=[("memory_search", {"query": "secret recipe pancakes", "k": 20})],
        remember=[("memory_write", {"text": "Ana's secret recipe is pancakes."})],
    )
    harbor = make_runtime(tool_model(calls, outputs), memory_tools=True)
    beacon: AgentRuntime = make_runtime(
        tool_model(calls, outputs), memory_tools=True, character=other_character
    )
    assert harbor.agent_id != beacon.agent_id

    told_beacon = await beacon.handle(dm("My secret recipe is pancakes."))
    await beacon.handle(dm("remember my recipe"))
    beacon_note = outputs[-1]["stored"]

    await harbor.handle(dm("search for it"))
    assert outputs[-1]["results"] == []  # Beacon's memories are not Harbor's

    read = by_prefix(
        read=[("memory_read", {"id": told_beacon.inbound_id}), ("memory_read", {"id": beacon_note})]
    )
    harbor_reader = make_runtime(tool_model(read, outputs), memory_tools=True)
    await harbor_reader.handle(dm("read them"))
    assert outputs[-2:] == [
        {"error": f"error: no memory with id {told_beacon.inbound_id}"},
        {"error": f"error: no memory with id {beacon_note}"},
    ]

    await harbor.handle(dm("remember my recipe"))
    harbor_note = await store.get_memory(outputs[-1]["stored"])  # not "already known" (Beacon's)
    assert harbor_note is not None and harbor_note.agent_id == harbor.agent_id
    beacon_facts = await store.get_memories(agent_id=beacon.agent_id, kinds=[MemoryKind.FACT])
    assert [f.id for f in beacon_facts] == [beacon_note]


async def test_memory_search_keeps_private_conversations_private(make_runtime) -> None:
    outputs: list[dict[str, Any]] = []
    calls = by_prefix(search=[("memory_search", {"query": "hint pineapple password", "k": 10})])
    runtime = make_runtime(tool_model(calls, outputs), memory_tools=True)
    secret = await runtime.handle(dm("My password hint is pineapple.", user="bob"))
    public = await runtime.handle(
        group("Pineapple on pizza is a password to chaos.", user="cy", mentions_agent=True)
    )

    await runtime.handle(group("search for it", user="ana", mentions_agent=True))
    found = [r["id"] for r in outputs[-1]["results"]]
    assert public.inbound_id in found and secret.inbound_id not in found

    await runtime.handle(dm("search for it", user="bob"))  # Bob's own DM: his words are his
    found = [r["id"] for r in outputs[-1]["results"]]
    assert secret.inbound_id in found and public.inbound_id in found

    read = by_prefix(read=[("memory_read", {"id": secret.inbound_id})])
    reader = make_runtime(tool_model(read, outputs), memory_tools=True)
    await reader.handle(group("read it", user="ana", mentions_agent=True))
    assert outputs[-1] == {"error": f"error: no memory with id {secret.inbound_id}"}


def test_memory_tools_switched_on_by_setting_or_character(character) -> None:  # type: ignore[no-untyped-def]
    from carrier.assemble import build_runtime
    from carrier.llm.fake import ScriptedModel
    from carrier.memory.fake import HashEmbedder
    from carrier.settings import load_settings

    def tools_of(ch, env):  # type: ignore[no-untyped-def]
        runtime, _ = build_runtime(
            ch,
            settings=load_settings(env),
            store=None,
            embedder=HashEmbedder(),
            environ={},
            model=ScriptedModel([]),  # type: ignore[arg-type]
        )
        return sorted(a.name for a in runtime.registry.actions.values() if a.parameters is not None)

    assert tools_of(character, {}) == []
    assert tools_of(character, {"CARRIER_MEMORY_TOOLS": "true"}) == [
        "MEMORY_READ",
        "MEMORY_SEARCH",
        "MEMORY_WRITE",
    ]
    own = character.model_copy(
        update={"settings": character.settings.model_copy(update={"memoryTools": True})}
    )
    assert tools_of(own, {}) == ["MEMORY_READ", "MEMORY_SEARCH", "MEMORY_WRITE"]
