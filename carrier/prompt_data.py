"""The data part of a prompt: conversations, memories, facts, knowledge and notes as elements.

What people said and what the agent remembers reaches the model in the user message, never in the
system message, each piece through :mod:`carrier.untrusted` (escaped, fenced, continuation lines
indented, speakers as labels). This module knows how each kind of memory looks there::

    <conversation platform="discord" room="general">
    <message from="Ana" at="2024-05-01 10:00">hello</message>
    <message from="Harbor (you)" at="2024-05-01 10:01">Ahoy!</message>
    </conversation>
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from carrier.memory.base import Store
from carrier.types import Attachment, Memory, MemoryKind, stable_id
from carrier.untrusted import Speaker, SpeakerLabels, block, clean_name, element

__all__ = [
    "ATTACHMENT_TEXT_CHARS",
    "attachment_element",
    "conversation",
    "facts_block",
    "format_memories",
    "knowledge_block",
    "message_element",
    "notes_block",
    "speaker_labels",
    "speakers_of",
    "summaries_block",
    "summary_element",
]

ATTACHMENT_TEXT_CHARS = 2_000
"""An attachment's extracted text is cut to this in a prompt."""


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M")


def _speaker_name(memory: Memory) -> str:
    return str(memory.content.metadata.get("speaker") or "someone")


def attachment_element(attachment: Attachment) -> str:
    """A file that came with a message: its kind, name and size, and its text or description."""
    kind = "image" if (attachment.content_type or "").startswith("image/") else "file"
    name = clean_name(attachment.title or attachment.content_type, limit=80, fallback="unnamed")
    size = f"{attachment.size / 1024:.0f} KB" if attachment.size else None
    text = attachment.text or attachment.description or ""
    return element("attachment", text, limit=ATTACHMENT_TEXT_CHARS, kind=kind, name=name, size=size)


_REMEMBERED_TEXT = 2_000
"""Messages up to this long (a Discord message's most) are rendered once for the prompts that
show them again (a room's history repeats in every turn's prompt), the last 2,048 of them;
longer ones are rendered each time, so that what is kept stays a few megabytes."""


@functools.lru_cache(maxsize=2_048)
def _remembered_message(text: str, label: str, at: datetime, offset: timedelta | None) -> str:
    # ``offset``: equal instants in two time zones are equal keys, but not equal stamps.
    return element("message", text, from_=label, at=_stamp(at))


def message_element(memory: Memory, labels: SpeakerLabels) -> str:
    """One message, its speaker's label in ``from``; its attachments follow its text."""
    label = labels.label(memory.entity_id, _speaker_name(memory))
    text = memory.content.text
    if len(text) <= _REMEMBERED_TEXT:
        inner = _remembered_message(text, label, memory.created_at, memory.created_at.utcoffset())
    else:
        inner = element("message", text, from_=label, at=_stamp(memory.created_at))
    if not memory.content.attachments:
        return inner
    files = "\n".join(attachment_element(a) for a in memory.content.attachments)
    # The attachments sit inside the message, after its text, one per (indented) line.
    opened, closing = inner[: -len("</message>")], "</message>"
    indented = "\n".join(f"  {line}" for line in files.splitlines())
    return f"{opened}\n{indented}\n{closing}"


def summary_element(memory: Memory) -> str:
    """A conversation summary, dated at the last message it covers."""
    return element(
        "summary",
        memory.content.text,
        messages=memory.content.metadata.get("messages"),
        at=_stamp(memory.created_at),
    )


def format_memories(memories: Iterable[Memory], labels: SpeakerLabels) -> str:
    """Messages and summaries as elements, one per line, in the order given."""
    return "\n".join(
        summary_element(m) if m.kind is MemoryKind.SUMMARY else message_element(m, labels)
        for m in memories
    )


def conversation(
    memories: Sequence[Memory], labels: SpeakerLabels, *, tag: str = "conversation", **attrs: object
) -> str:
    """``memories`` (oldest first) wrapped in ``<conversation>`` (or ``tag``)."""
    return block(tag, [format_memories(memories, labels)], **attrs)


def facts_block(facts: Iterable[Memory], *, about: str | None = None) -> str:
    """Facts (claims the model extracted from what people said) as ``<fact>`` elements."""
    return block("facts", (element("fact", f.content.text) for f in facts), about=about)


def knowledge_block(texts: Iterable[str]) -> str:
    """Knowledge fragments, best first, as ``<fragment>`` elements."""
    return block("knowledge", (element("fragment", t) for t in texts))


def notes_block(texts: Iterable[str]) -> str:
    """The agent's notes about a room (written by the model from what people said)."""
    return block("notes", (element("note", t) for t in texts))


def summaries_block(memories: Iterable[Memory], spans: Iterable[str]) -> str:
    """A room's latest summaries with the time each covers."""
    return block(
        "summaries",
        (element("summary", m.content.text, span=s) for m, s in zip(memories, spans, strict=True)),
    )


def speakers_of(memories: Iterable[Memory], *, agent_id: str) -> list[Speaker]:
    """The people who speak in ``memories`` (their latest name), the agent left out."""
    agent_entity = stable_id(agent_id, "agent")
    found: dict[str, Speaker] = {}
    for memory in memories:
        if memory.kind is MemoryKind.MESSAGE and memory.entity_id != agent_entity:
            found[memory.entity_id] = Speaker(memory.entity_id, _speaker_name(memory))
    return list(found.values())


async def speaker_labels(
    store: Store,
    memories: Iterable[Memory],
    *,
    agent_id: str,
    agent_name: str,
    agent_names: Iterable[str] = (),
    also: Iterable[Speaker] = (),
) -> SpeakerLabels:
    """Labels for the speakers of ``memories`` (and ``also``, e.g. the sender with their handle).
    Handles are read from the store only for people whose names collide, which is rare."""
    names = [agent_name, *agent_names]
    people = {s.id: s for s in speakers_of(memories, agent_id=agent_id)}
    for extra in also:
        people[extra.id] = extra
    agent_entity = stable_id(agent_id, "agent")
    for entity_id in SpeakerLabels.needing_handles(
        people.values(), agent_id=agent_entity, agent_names=names
    ):
        speaker = people[entity_id]
        if speaker.handle:
            continue
        entity = await store.get_entity(entity_id)
        if entity is not None:
            others = [n for n in entity.names[1:] if n != speaker.name]
            handle = others[0] if others else entity.platform_id
            people[entity_id] = Speaker(entity_id, speaker.name, handle)
    return SpeakerLabels(
        agent_id=agent_entity, agent_name=agent_name, agent_names=names, speakers=people.values()
    )
