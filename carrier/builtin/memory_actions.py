"""Memory tools the model can call, and the ``memory`` plugin that bundles them with summaries.

``memory_search{query, k, kind}``, ``memory_write{text, about}`` and ``memory_read{id}`` are tool
actions (they have ``parameters``): the model calls them through tool calling and reads their
output (JSON) before answering. They only ever see the running agent's memories, and not all of
those: a memory from another person's private conversation (a DM, an API or terminal session) is
invisible outside it, so nothing said in private is repeated in public. ``memory_read`` answers
"no memory with that id" for a memory that exists but is not visible, as for one that does not.
"""

from __future__ import annotations

import json
from typing import Any

from carrier.builtin.evaluators import DUPLICATE_FACT_SCORE
from carrier.builtin.summaries import ConversationSummarizer
from carrier.memory.visibility import Visibility
from carrier.pipeline.base import Turn
from carrier.plugins import Action, ActionResult, ContextProvider, Plugin, ProviderOutput
from carrier.prompt_data import notes_block
from carrier.types import (
    Content,
    Memory,
    MemoryKind,
    MemoryStatus,
    stable_id,
)

__all__ = ["MAX_SEARCH_RESULTS", "memory_actions", "memory_plugin", "room_notes_provider"]

MAX_SEARCH_RESULTS = 20
NOTE_MAX_CHARS = 1_000
RESULT_TEXT_CHARS = 500
"""A found memory's text is cut to this in search results (memory_read gives all of it)."""


SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": 500,
            "description": "What to look for, in words (searched by meaning and by rare words).",
        },
        "k": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SEARCH_RESULTS,
            "default": 5,
            "description": "How many memories to return.",
        },
        "kind": {
            "type": "string",
            "enum": [k.value for k in MemoryKind],
            "description": "Only memories of this kind (message, fact, summary, knowledge, ...).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
WRITE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {
            "type": "string",
            "minLength": 1,
            "maxLength": NOTE_MAX_CHARS,
            "description": "The note, as a short self-contained sentence.",
        },
        "about": {
            "type": "string",
            "enum": ["sender", "room"],
            "default": "sender",
            "description": "Whom it is about: the person you are talking with, or this room.",
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}
READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 100, "description": "A memory id."}
    },
    "required": ["id"],
    "additionalProperties": False,
}


class _BadArguments(ValueError):
    pass


def _arguments(turn: Turn, schema: dict[str, Any]) -> dict[str, Any]:
    from jsonschema import Draft202012Validator

    call = turn.current_tool_call or {}
    arguments = call.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise _BadArguments("arguments must be a JSON object")
    errors = sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        where = ".".join(str(p) for p in errors[0].path) or "arguments"
        raise _BadArguments(f"invalid arguments at {where}: {errors[0].message}")
    return arguments


def _failed(action: str, message: str) -> ActionResult:
    return ActionResult(
        action=action, ok=False, error=message, data={"output": f"error: {message}"}
    )


def _output(action: str, payload: dict[str, Any], **data: Any) -> ActionResult:
    return ActionResult(action=action, data={"output": json.dumps(payload), **data})


def _visibility(turn: Turn) -> Visibility:
    assert turn.room is not None and turn.entity is not None
    return Visibility(
        store=turn.runtime.store,
        agent_id=turn.runtime.agent_id,
        room=turn.room,
        entity_id=turn.entity.id,
    )


def _describe(memory: Memory, *, cut: int | None = None) -> dict[str, Any]:
    text = memory.content.text
    if cut is not None and len(text) > cut:
        text = text[: cut - 1] + "…"
    out: dict[str, Any] = {
        "id": memory.id,
        "kind": memory.kind.value,
        "when": memory.created_at.strftime("%Y-%m-%d %H:%M"),
        "text": text,
    }
    meta = memory.content.metadata
    if memory.kind is MemoryKind.MESSAGE:
        out["speaker"] = meta.get("speaker", "someone")
    elif memory.kind is MemoryKind.SUMMARY:
        out["covers"] = {
            "from": meta.get("from"),
            "to": meta.get("to"),
            "messages": meta.get("messages"),
        }
    elif memory.kind is MemoryKind.FACT:
        out["about"] = meta.get("about") or "person"
    return out


async def _search(turn: Turn) -> ActionResult:
    rt = turn.runtime
    try:
        args = _arguments(turn, SEARCH_PARAMETERS)
    except _BadArguments as exc:
        return _failed("MEMORY_SEARCH", str(exc))
    k = int(args.get("k", 5))
    kinds = [MemoryKind(args["kind"])] if args.get("kind") else None
    query = str(args["query"])
    vector = await rt.embedder.embed_one(query)
    # Hybrid: words (names, numbers, rare terms) and meaning, fused by reciprocal rank.
    hits = await rt.store.search_hybrid(
        agent_id=rt.agent_id,
        text=query,
        embedding=vector.tolist(),
        embedding_model=rt.embedder.model_id,
        k=k * 3,  # room for the ones visibility drops
        kinds=kinds,
        exclude_ids=[turn.inbound.id] if turn.inbound is not None else (),
        embeddings=False,
    )
    shown = {m.id for m in await _visibility(turn).filter([hit.memory for hit in hits])}
    results = [
        {**_describe(hit.memory, cut=RESULT_TEXT_CHARS), "score": round(hit.score, 4)}
        for hit in hits
        if hit.memory.id in shown
    ][:k]
    return _output("MEMORY_SEARCH", {"results": results}, ids=[r["id"] for r in results])


async def _write(turn: Turn) -> ActionResult:
    rt = turn.runtime
    assert turn.room is not None and turn.entity is not None
    try:
        args = _arguments(turn, WRITE_PARAMETERS)
    except _BadArguments as exc:
        return _failed("MEMORY_WRITE", str(exc))
    text = " ".join(str(args["text"]).split())
    about = str(args.get("about") or "sender")
    # A note about the room belongs to the agent itself, kept in that room.
    entity_id = turn.entity.id if about == "sender" else stable_id(rt.agent_id, "agent")
    vector = await rt.embedder.embed_one(text)
    near = await rt.store.search_memories(
        agent_id=rt.agent_id,
        embedding=vector.tolist(),
        embedding_model=rt.embedder.model_id,
        k=1,
        entity_id=entity_id,
        room_id=None if about == "sender" else turn.room.id,
        kinds=[MemoryKind.FACT],
        min_score=DUPLICATE_FACT_SCORE,
        embeddings=False,
    )
    if near:
        return _output(
            "MEMORY_WRITE",
            {"already_known": near[0].memory.id, "text": near[0].memory.content.text},
        )
    memory = await rt.store.add_memory(
        Memory(
            agent_id=rt.agent_id,
            room_id=turn.room.id,
            entity_id=entity_id,
            kind=MemoryKind.FACT,
            content=Content(
                text=text,
                source="memory_write",
                metadata={
                    "type": "note",
                    "about": about,
                    "from_message": turn.inbound.id if turn.inbound is not None else None,
                },
            ),
            embedding=vector.tolist(),
            embedding_model=rt.embedder.model_id,
            status=MemoryStatus.STORED,
        )
    )
    return _output("MEMORY_WRITE", {"stored": memory.id, "about": about}, id=memory.id)


async def _read(turn: Turn) -> ActionResult:
    rt = turn.runtime
    try:
        args = _arguments(turn, READ_PARAMETERS)
    except _BadArguments as exc:
        return _failed("MEMORY_READ", str(exc))
    memory_id = str(args["id"]).strip()
    memory = await rt.store.get_memory(memory_id)
    if memory is None or not await _visibility(turn).allows(memory):
        return _failed("MEMORY_READ", f"no memory with id {memory_id}")
    return _output("MEMORY_READ", _describe(memory))


def memory_actions() -> list[Action]:
    """The three memory tools."""
    return [
        Action(
            name="MEMORY_SEARCH",
            tool_name="memory_search",
            description=(
                "Search your long-term memory (past conversations, summaries, facts and notes "
                "about people, knowledge) by meaning. Use it when asked about something that is "
                "not in the conversation above."
            ),
            handler=_search,
            parameters=SEARCH_PARAMETERS,
        ),
        Action(
            name="MEMORY_WRITE",
            tool_name="memory_write",
            description=(
                "Remember something for later: a durable fact or preference about the person you "
                "are talking with (about=sender) or about this room (about=room)."
            ),
            handler=_write,
            parameters=WRITE_PARAMETERS,
        ),
        Action(
            name="MEMORY_READ",
            tool_name="memory_read",
            description="Read one memory in full by its id (ids come from memory_search).",
            handler=_read,
            parameters=READ_PARAMETERS,
        ),
    ]


def room_notes_provider(*, limit: int = 10) -> ContextProvider:
    """The notes the agent wrote about the current room (``memory_write`` with about=room)."""

    async def provide(turn: Turn) -> ProviderOutput:
        if turn.room is None:
            return ProviderOutput()
        rt = turn.runtime
        notes = await rt.store.get_memories(
            agent_id=rt.agent_id,
            room_id=turn.room.id,
            entity_id=stable_id(rt.agent_id, "agent"),
            kinds=[MemoryKind.FACT],
            limit=limit,
            embeddings=False,
        )
        if not notes:
            return ProviderOutput()
        # Notes are the model's words about what people said: data, like what they said.
        return ProviderOutput(
            values={"roomNotes": notes_block(n.content.text for n in reversed(notes))}
        )

    return ContextProvider(name="room_notes", provide=provide, position=46, local=True)


def memory_plugin(*, window: int = 20, summary_threshold: int = 20, tools: bool = False) -> Plugin:
    """Long-term conversation memory for a runtime: summaries of what leaves the recent
    ``window`` (every ``summary_threshold`` messages; 0 turns summarizing off), the room's latest
    summaries in the prompt, and, with ``tools``, the memory tools and the room's notes.

    The tools are opt-in because offering any tool makes the first model call non-streaming (it
    may be a tool call rather than text)."""
    summarizer = ConversationSummarizer(window=window, threshold=max(summary_threshold, 1))
    return Plugin(
        name="memory",
        actions=memory_actions() if tools else (),
        evaluators=[summarizer.as_evaluator()] if summary_threshold > 0 else (),
        providers=[summarizer.as_provider(), *([room_notes_provider()] if tools else [])],
        description="Conversation summaries and memory tools.",
    )
