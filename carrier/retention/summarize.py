"""Summaries first: a room's old messages compacted into its summaries before they are deleted.

The room's own summarizer (:class:`~carrier.builtin.summaries.ConversationSummarizer`) writes
them, so they are the summaries a turn would have written: dated at the last message they cover,
recalled by meaning, shown as "earlier in this conversation". Only what the room's summaries do
not cover yet is summarized, oldest first, in chunks. A room whose summary could not be written
(the model failed, or this run's budget of model calls ran out) keeps its old messages until a
later run: nothing is deleted unsummarized when summaries were asked for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from carrier.builtin.summaries import ConversationSummarizer
from carrier.memory.rights import iter_memories
from carrier.pipeline.base import Turn
from carrier.runtime import AgentRuntime
from carrier.types import Author, Channel, Memory, MemoryKind, Message, Usage

__all__ = ["SummaryRun", "summarize_before"]

log = logging.getLogger(__name__)

MAX_CALLS = 100
"""Model calls (one summary each) one run may make for one agent; the rest waits for the next."""


@dataclass
class SummaryRun:
    """What :func:`summarize_before` did."""

    ready: list[str] = field(default_factory=list)
    """Rooms whose old messages are all covered by summaries now: safe to delete."""
    waiting: list[str] = field(default_factory=list)
    """Rooms whose old messages are not all covered (kept for a later run)."""
    summaries: int = 0
    """Summaries written."""
    usage: Usage = field(default_factory=Usage)


def _turn(runtime: AgentRuntime, room_id: str) -> Turn:
    """A turn that only carries the runtime (and counts the model's usage): the summarizer
    needs nothing else."""
    message = Message(
        platform="retention",
        author=Author(platform_id="retention", name="retention"),
        channel=Channel(platform_id=room_id),
    )
    return Turn(runtime=runtime, message=message)


async def _rooms(runtime: AgentRuntime, before: datetime) -> list[str]:
    rooms: dict[str, None] = {}
    async for memory in iter_memories(
        runtime.store, agent_id=runtime.agent_id, kinds=[MemoryKind.MESSAGE], before=before
    ):
        rooms.setdefault(memory.room_id)
    return list(rooms)


async def summarize_before(
    runtime: AgentRuntime,
    *,
    before: datetime,
    summarizer: ConversationSummarizer | None = None,
    max_calls: int = MAX_CALLS,
) -> SummaryRun:
    """Summarize, room by room, the agent's messages older than ``before`` that the room's
    summaries do not cover yet."""
    summarizer = summarizer or ConversationSummarizer()
    store, agent_id = runtime.store, runtime.agent_id
    run = SummaryRun()
    calls = 0
    for room_id in await _rooms(runtime, before):
        mark = await summarizer.watermark(store, agent_id=agent_id, room_id=room_id)
        old: list[Memory] = [
            m
            async for m in iter_memories(
                store, agent_id=agent_id, room_id=room_id, kinds=[MemoryKind.MESSAGE], before=before
            )
            if not mark.covers(m)
        ]
        old.reverse()  # oldest first
        latest = await store.get_memories(
            agent_id=agent_id,
            room_id=room_id,
            kinds=[MemoryKind.SUMMARY],
            limit=1,
            embeddings=False,
        )
        previous = latest[0].content.text if latest else ""
        turn = _turn(runtime, room_id)
        done = True
        for start in range(0, len(old), summarizer.max_batch):
            if calls >= max_calls:
                done = False
                break
            calls += 1
            try:
                summary = await summarizer.summarize(
                    turn, old[start : start + summarizer.max_batch], previous=previous
                )
            except Exception:
                log.exception(
                    "retention: summarizing room %s of agent %s failed", room_id, agent_id
                )
                summary = None
            if summary is None:
                done = False
                break
            run.summaries += 1
            previous = summary.content.text
        run.usage.add(turn.usage)
        (run.ready if done else run.waiting).append(room_id)
    return run
