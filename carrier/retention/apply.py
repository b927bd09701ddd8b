"""One agent's retention policy applied once: its old messages (summarized first when asked) and
its old uploads deleted, and the run recorded in the audit log as a ``memory.prune`` event.

Only what the policy names goes: messages (``kind: message``, either side of a conversation)
older than ``settings.retention.messages`` days, and uploaded files older than
``settings.retention.uploads`` days (but those a post still waiting needs). Facts, summaries,
knowledge, posts and reflections stay.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from carrier.audit.base import NULL_AUDIT, AuditLog
from carrier.audit.context import current_actor
from carrier.audit.model import AuditKind
from carrier.character.parts import RetentionPolicy
from carrier.memory.base import Store
from carrier.retention.prune import prune_memories, prune_uploads
from carrier.runtime import AgentRuntime
from carrier.types import MemoryKind

__all__ = ["PruneReport", "apply_policy"]

log = logging.getLogger(__name__)

RuntimeSource = Callable[[], Awaitable[AgentRuntime]]
"""Gives a runtime of the agent (its model, to summarize with), asked only when needed."""


@dataclass
class PruneReport:
    """What one retention run did for one agent."""

    agent_id: str
    messages: int = 0
    """Messages deleted."""
    uploads: int = 0
    """Uploaded files deleted."""
    summaries: int = 0
    """Summaries written first."""
    waiting_rooms: list[str] = field(default_factory=list)
    """Rooms whose old messages were kept: their summary could not be written this time."""
    dry_run: bool = False

    def detail(self, policy: RetentionPolicy) -> dict[str, Any]:
        return {
            "policy": policy.model_dump(by_alias=True, exclude_none=True),
            "messages": self.messages,
            "uploads": self.uploads,
            "summaries": self.summaries,
            "rooms_kept_unsummarized": len(self.waiting_rooms),
        }


async def apply_policy(
    *,
    store: Store,
    data_dir: Path,
    agent_id: str,
    policy: RetentionPolicy,
    now: datetime,
    runtime: RuntimeSource | None = None,
    audit: AuditLog = NULL_AUDIT,
) -> PruneReport:
    """Apply ``policy`` to the agent as of ``now``. ``runtime`` is needed only when the policy
    asks for summaries (without one, messages are kept rather than deleted unsummarized)."""
    report = PruneReport(agent_id=agent_id)
    if policy.messages is not None:
        before = now - timedelta(days=policy.messages)
        if policy.summarize_before_delete:
            await _summarize_then_delete(store, agent_id, before, runtime, report)
        else:
            report.messages = await prune_memories(
                store, agent_id=agent_id, kinds=[MemoryKind.MESSAGE], before=before
            )
    if policy.uploads is not None:
        report.uploads = await prune_uploads(
            store, data_dir, agent_id=agent_id, before=now - timedelta(days=policy.uploads)
        )
    await audit.record(
        AuditKind.MEMORY_PRUNE,
        actor=current_actor(),
        agent_id=agent_id,
        action="retention",
        detail=report.detail(policy),
    )
    log.info(
        "retention of agent %s: %d messages and %d uploads deleted, %d summaries written",
        agent_id,
        report.messages,
        report.uploads,
        report.summaries,
    )
    return report


async def _summarize_then_delete(
    store: Store,
    agent_id: str,
    before: datetime,
    runtime: RuntimeSource | None,
    report: PruneReport,
) -> None:
    from carrier.retention.summarize import summarize_before

    if runtime is None:
        log.warning(
            "retention of agent %s: summaries asked for but no model to write them; old "
            "messages kept",
            agent_id,
        )
        report.waiting_rooms = ["*"]
        return
    run = await summarize_before(await runtime(), before=before)
    report.summaries, report.waiting_rooms = run.summaries, run.waiting
    for room_id in run.ready:
        report.messages += await prune_memories(
            store, agent_id=agent_id, kinds=[MemoryKind.MESSAGE], before=before, room_id=room_id
        )
