"""Built-in context providers: time, room/platform context, keyword-triggered lore (a character
card's lorebook) and knowledge fragments.

Time, room kind and lore are the operator's words and go in the system message; knowledge (from
documents) is data, fenced by :func:`carrier.prompt_data.knowledge_block` for the user message."""

from __future__ import annotations

from carrier.pipeline.base import Turn
from carrier.plugins import ContextProvider, ProviderOutput
from carrier.prompt_data import knowledge_block
from carrier.types import MemoryKind, RoomKind, utcnow

__all__ = ["builtin_providers"]

LOREBOOK_ENTRIES = 5
KNOWLEDGE_FRAGMENTS = 4
KNOWLEDGE_MIN_COSINE = 0.3
"""A knowledge fragment that shares no word with the message needs at least this cosine."""


async def _time(turn: Turn) -> ProviderOutput:
    now = utcnow()
    return ProviderOutput(
        values={"time": f"The current date and time is {now:%A %Y-%m-%d %H:%M} UTC."}
    )


_ROOM_WORDS = {
    RoomKind.DM: "a private direct conversation",
    RoomKind.GROUP: "a group channel",
    RoomKind.THREAD: "a thread",
    RoomKind.API: "a conversation over the API",
    RoomKind.CLI: "a terminal chat",
}


async def _room(turn: Turn) -> ProviderOutput:
    room = turn.room
    if room is None:
        return ProviderOutput()
    where = _ROOM_WORDS.get(room.kind, "a conversation")
    # The room's and the sender's names are data (the conversation element carries them).
    named = " (its name is on the <conversation> element)" if room.name else ""
    return ProviderOutput(values={"room": f"You are on {room.platform}, in {where}{named}."})


async def _lorebook(turn: Turn) -> ProviderOutput:
    entries = list(getattr(turn.runtime.character, "lorebook", []) or [])
    if not entries:
        return ProviderOutput()
    window = (
        " ".join(m.content.text for m in (turn.state.recent[-4:] if turn.state else []))
        + " "
        + turn.text
    )
    hits = []
    for entry in entries:
        if not getattr(entry, "enabled", True):
            continue
        sensitive = bool(getattr(entry, "case_sensitive", False))
        haystack = window if sensitive else window.lower()
        keys = [k if sensitive else k.lower() for k in getattr(entry, "keys", [])]
        if any(k and k in haystack for k in keys):
            hits.append(entry)
    hits.sort(key=lambda e: getattr(e, "insertion_order", 0) or 0)
    if not hits:
        return ProviderOutput()
    text = "\n".join(f"- {e.content}" for e in hits[:LOREBOOK_ENTRIES])
    return ProviderOutput(values={"lorebook": f"\n## Lore that applies here\n{text}\n"})


async def _knowledge(turn: Turn) -> ProviderOutput:
    rt = turn.runtime
    if turn.inbound is None or turn.inbound.embedding is None:
        return ProviderOutput()
    # Hybrid: a fragment that shares a rare word with the message (a name, a product) is found
    # even when its vector is not close; what neither side vouches for is left out.
    found = await rt.store.search_hybrid(
        agent_id=rt.agent_id,
        text=turn.text,
        embedding=turn.inbound.embedding,
        embedding_model=rt.embedder.model_id,
        k=KNOWLEDGE_FRAGMENTS,
        kinds=[MemoryKind.KNOWLEDGE],
        embeddings=False,  # the search measured the cosines relevance needs
        min_similarity=KNOWLEDGE_MIN_COSINE,
    )
    if not found:
        return ProviderOutput()
    return ProviderOutput(
        values={"knowledge": knowledge_block(s.memory.content.text for s in found)}
    )


def builtin_providers() -> list[ContextProvider]:
    return [
        ContextProvider(name="time", provide=_time, position=10, local=True),
        ContextProvider(name="room", provide=_room, position=20, local=True),
        ContextProvider(name="lorebook", provide=_lorebook, position=30, local=True),
        ContextProvider(name="knowledge", provide=_knowledge, position=40, local=True),
    ]
