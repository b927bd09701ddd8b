"""Data rights over an agent's memories: forget a person, export and import as JSON Lines.

Everything here goes through the :class:`~carrier.memory.base.Store`'s public methods, so it works
the same on every store, and streams: memories are read a page at a time (:func:`iter_memories`),
never all at once, so an agent with a million memories exports in constant memory.

Forgetting a person (:func:`forget_entity`) deletes, for one agent:

- every memory whose ``entity_id`` is theirs, in every room: the messages they wrote, the facts
  and notes about them;
- the agent's replies to their messages (``content.in_reply_to`` one of theirs): a reply answers
  and often quotes what they said, so keeping it would keep them;
- the conversation summaries that cover any of their messages (a summary retells them). The
  summarizer rebuilds the latest summary of a room from what is left on a later turn; older
  summaries are not rebuilt, the other people's messages stay recallable one by one.

- their entity record (the names and platform id they were seen with) and room memberships.

It does not touch messages of other people that mention them, or facts about other people. A
running agent writes a new entity record when the person speaks again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TextIO

from pydantic import ValidationError

from carrier.audit.base import NULL_AUDIT, AuditLog
from carrier.audit.context import current_actor
from carrier.audit.model import AuditKind
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.types import Memory, MemoryKind, stable_id

__all__ = [
    "ForgetReport",
    "ImportReport",
    "LineError",
    "entity_id_for",
    "export_memories",
    "forget_entity",
    "import_memories",
    "iter_memories",
]

log = logging.getLogger(__name__)

PAGE_SIZE = 500
IMPORT_BATCH = 256
"""Memories imported (and embedded) per batch."""
_TICK = timedelta(microseconds=1)


def entity_id_for(agent_id: str, platform: str, platform_user_id: str) -> str:
    """The entity id the runtime gives a person: what ``/forget`` on a platform passes on."""
    return stable_id(agent_id, platform, "entity", platform_user_id)


async def iter_memories(
    store: Store,
    *,
    agent_id: str,
    room_id: str | None = None,
    entity_id: str | None = None,
    kinds: Sequence[MemoryKind] | None = None,
    page_size: int = PAGE_SIZE,
    before: datetime | None = None,
) -> AsyncIterator[Memory]:
    """Every matching memory (created before ``before``, when given), newest first, a page at a
    time.

    Pages are cut at ``created_at`` and memories may share one (platform timestamps in
    milliseconds, summaries dated at the last message they cover), so each page re-reads the
    cursor's instant and skips what it already gave; a page made only of one instant grows until
    it gets past it.
    """
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    limit = page_size
    cursor = None
    seen_at_cursor: set[str] = set()
    while True:
        page = await store.get_memories(
            agent_id=agent_id,
            room_id=room_id,
            entity_id=entity_id,
            kinds=kinds,
            before=cursor + _TICK if cursor is not None else before,
            limit=limit,
        )
        fresh = [m for m in page if not (m.created_at == cursor and m.id in seen_at_cursor)]
        for memory in fresh:
            yield memory
        if len(page) < limit:
            return
        if not fresh:
            limit *= 2  # a full page of one instant, all given already: look further
            continue
        limit = page_size
        oldest = page[-1].created_at
        if oldest != cursor:
            cursor, seen_at_cursor = oldest, set()
        seen_at_cursor.update(m.id for m in page if m.created_at == cursor)


# -- forget ---------------------------------------------------------------------------------------
@dataclass
class ForgetReport:
    """What :func:`forget_entity` deleted."""

    messages: int = 0
    """Messages the person wrote."""
    facts: int = 0
    """Facts and notes about them."""
    other: int = 0
    """Other memories with their entity id (posts, reflections, ...)."""
    replies: int = 0
    """The agent's replies to their messages."""
    summaries: int = 0
    """Conversation summaries that covered their messages."""
    rooms: list[str] = field(default_factory=list)
    """Rooms they left memories in."""
    entity: bool = False
    """Whether their entity record was deleted (False: there was none)."""

    @property
    def total(self) -> int:
        return self.messages + self.facts + self.other + self.replies + self.summaries


async def forget_entity(
    store: Store,
    *,
    agent_id: str,
    entity_id: str,
    include_replies: bool = True,
    page_size: int = PAGE_SIZE,
    audit: AuditLog = NULL_AUDIT,
) -> ForgetReport:
    """Delete what one agent keeps of one person (see the module docstring for exactly what).

    Safe to run twice (the second run finds nothing). Other agents' memories are never touched.
    Recorded in ``audit`` as a ``memory.forget`` event (the counts, never what was deleted), by
    the actor the caller's edge names (:func:`carrier.audit.context.current_actor`).
    """
    report = ForgetReport()
    theirs: set[str] = set()
    rooms: dict[str, None] = {}
    async for memory in iter_memories(
        store, agent_id=agent_id, entity_id=entity_id, page_size=page_size
    ):
        rooms.setdefault(memory.room_id)
        if memory.kind is MemoryKind.MESSAGE:
            theirs.add(memory.id)
            report.messages += 1
        elif memory.kind is MemoryKind.FACT:
            report.facts += 1
        else:
            report.other += 1
    report.rooms = list(rooms)

    doomed: list[str] = []
    for room_id in report.rooms:
        if include_replies and theirs:
            async for memory in iter_memories(
                store,
                agent_id=agent_id,
                room_id=room_id,
                kinds=[MemoryKind.MESSAGE],
                page_size=page_size,
            ):
                if memory.entity_id != entity_id and memory.content.in_reply_to in theirs:
                    doomed.append(memory.id)
                    report.replies += 1
        async for memory in iter_memories(
            store,
            agent_id=agent_id,
            room_id=room_id,
            kinds=[MemoryKind.SUMMARY],
            page_size=page_size,
        ):
            meta = memory.content.metadata
            covers = meta.get("covers")
            if entity_id in (meta.get("entities") or ()) or (
                isinstance(covers, list) and theirs.intersection(map(str, covers))
            ):
                doomed.append(memory.id)
                report.summaries += 1

    for memory_id in doomed:
        await store.delete_memory(memory_id)
    deleted = await store.delete_memories(agent_id=agent_id, entity_id=entity_id)
    report.entity = await store.delete_entity(entity_id)
    read = report.messages + report.facts + report.other
    if deleted != read:
        # Memories arrived or went between the read and the delete; the delete is what counts.
        log.info("forget %s: read %d own memories, deleted %d", entity_id, read, deleted)
        report.other = max(deleted - report.messages - report.facts, 0)
    log.info(
        "forgot entity %s for agent %s: %d memories in %d room(s)",
        entity_id,
        agent_id,
        report.total,
        len(report.rooms),
    )
    await audit.record(
        AuditKind.MEMORY_FORGET,
        actor=current_actor(),
        agent_id=agent_id,
        action="forget",
        target=entity_id,
        detail={
            "deleted": report.total,
            "messages": report.messages,
            "facts": report.facts,
            "replies": report.replies,
            "summaries": report.summaries,
            "other": report.other,
            "rooms": len(report.rooms),
            "entity_record": report.entity,
        },
    )
    return report


# -- export ---------------------------------------------------------------------------------------
_EMBEDDING_FIELDS = {"embedding", "embedding_model"}


async def export_memories(
    store: Store,
    out: TextIO,
    *,
    agent_id: str,
    embeddings: bool = False,
    room_id: str | None = None,
    kinds: Sequence[MemoryKind] | None = None,
    page_size: int = PAGE_SIZE,
) -> int:
    """Write the agent's memories to ``out`` as JSON Lines, one :class:`Memory` per line (newest
    first), and return how many. Without ``embeddings`` the vectors are left out (a tenth of the
    size; :func:`import_memories` can embed again)."""
    exclude = None if embeddings else _EMBEDDING_FIELDS
    count = 0
    async for memory in iter_memories(
        store, agent_id=agent_id, room_id=room_id, kinds=kinds, page_size=page_size
    ):
        out.write(memory.model_dump_json(exclude=exclude) + "\n")
        count += 1
    return count


# -- import ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LineError:
    """A line :func:`import_memories` could not import, and why."""

    line: int
    """1-based line number."""
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class ImportReport:
    imported: int = 0
    existing: int = 0
    """Lines whose id was already stored for this agent (left as they are: import is idempotent)."""
    embedded: int = 0
    """Imported memories that had no vector and were embedded."""
    errors: list[LineError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _parse(line: str, agent_id: str) -> Memory:
    """One line as a memory for ``agent_id``; ``ValueError`` with a readable reason otherwise."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object (a memory), got {type(data).__name__}")
    try:
        memory = Memory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "memory"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ValueError(f"{where}: {first['msg']}{more}") from None
    if memory.agent_id != agent_id:
        raise ValueError(
            f"agent_id is {memory.agent_id!r}, not {agent_id!r}: it belongs to another agent"
        )
    if memory.embedding is not None:
        if not memory.embedding_model:
            raise ValueError("embedding without embedding_model (name:dim of the model)")
        _, _, dim = memory.embedding_model.rpartition(":")
        if dim.isdigit() and int(dim) != len(memory.embedding):
            raise ValueError(
                f"embedding has {len(memory.embedding)} dimensions, "
                f"embedding_model {memory.embedding_model!r} says {dim}"
            )
    return memory


async def import_memories(
    store: Store,
    lines: Iterable[str],
    *,
    agent_id: str,
    embedder: Embedder | None = None,
    batch_size: int = IMPORT_BATCH,
    before_embedding: Callable[[], Awaitable[None]] | None = None,
) -> ImportReport:
    """Import JSON Lines written by :func:`export_memories` into ``agent_id``'s memories.

    Each line is validated on its own: a bad line (not JSON, not a memory, another agent's, an id
    another agent uses) is reported with its line number and the rest go on. Ids already stored
    for the agent are left alone, so importing a file twice changes nothing. With an
    ``embedder``, memories without a vector are embedded (so they can be recalled); vectors in
    the file are kept as they are. Reads ``lines`` lazily, ``batch_size`` at a time.

    ``before_embedding`` is awaited once, just before the first embedding, and never when nothing
    needs one: the command line loads the model there under a sign of life (it takes seconds).
    """
    report = ImportReport()
    prepare = _once(before_embedding)
    batch: list[tuple[int, Memory]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            batch.append((number, _parse(line, agent_id)))
        except ValueError as exc:
            report.errors.append(LineError(number, str(exc)))
        if len(batch) >= batch_size:
            await _import_batch(store, batch, agent_id, embedder, report, prepare)
            batch = []
    if batch:
        await _import_batch(store, batch, agent_id, embedder, report, prepare)
    report.errors.sort(key=lambda e: e.line)  # a batch reports its id clashes after later lines
    return report


async def _import_batch(
    store: Store,
    batch: list[tuple[int, Memory]],
    agent_id: str,
    embedder: Embedder | None,
    report: ImportReport,
    prepare: Callable[[], Awaitable[None]],
) -> None:
    fresh: list[tuple[int, Memory]] = []
    for number, memory in batch:
        stored = await store.get_memory(memory.id)
        if stored is None:
            fresh.append((number, memory))
        elif stored.agent_id == agent_id:
            report.existing += 1
        else:
            report.errors.append(LineError(number, f"id {memory.id} is used by another agent"))
    if embedder is not None:
        missing = [m for _, m in fresh if m.embedding is None and m.content.text.strip()]
        if missing:
            await prepare()
            vectors = await embedder.embed([m.content.text for m in missing])
            for memory, vector in zip(missing, vectors, strict=True):
                memory.embedding = vector.tolist()
                memory.embedding_model = embedder.model_id
            report.embedded += len(missing)
    for _, memory in fresh:
        await store.add_memory(memory)
        report.imported += 1


def _once(action: Callable[[], Awaitable[None]] | None) -> Callable[[], Awaitable[None]]:
    """``action``, run on the first call only (for None, nothing at all)."""
    done = False

    async def run() -> None:
        nonlocal done
        if action is not None and not done:
            done = True
            await action()

    return run
