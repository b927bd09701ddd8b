"""Stage 2, the state composer: everything the model should know for this turn.

A sampled persona, the room's recent messages, semantically recalled memories, facts about the
sender, the actions available now, and the sections of the registered context providers.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from datetime import datetime

from carrier.builtin.persona import sample_persona
from carrier.memory.visibility import Visibility
from carrier.pipeline.base import Turn
from carrier.types import Attachment, Memory, MemoryKind, ScoredMemory

__all__ = ["State", "StateComposer", "format_memories"]

log = logging.getLogger(__name__)


@dataclass
class State:
    """The composed state of a turn: template values plus the data behind them."""

    values: dict[str, str] = field(default_factory=dict)
    recent: list[Memory] = field(default_factory=list)
    """Recent messages of the room, oldest first (the inbound message last)."""
    recalled: list[ScoredMemory] = field(default_factory=list)
    facts: list[Memory] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    """Every action available this turn, tools included."""
    named_actions: list[str] = field(default_factory=list)
    """The actions the model names in its answer (tools are called through tool calling)."""
    sections: dict[str, str] = field(default_factory=dict)
    """Text of each context provider, by name."""
    seed: int = 0


def _speaker(memory: Memory) -> str:
    return str(memory.content.metadata.get("speaker") or "someone")


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M")


def _describe_attachment(a: Attachment) -> str:
    kind = "image" if (a.content_type or "").startswith("image/") else "file"
    name = a.title or a.content_type or "unnamed"
    size = f", {a.size / 1024:.0f} KB" if a.size else ""
    text = f": {a.text[:2000]}" if a.text else ""
    return f"{kind} {name}{size}{text}"


def format_memories(memories: list[Memory]) -> str:
    """``[time] Name: text`` lines; attachments are listed by title; a conversation summary is
    ``[time] (summary of N messages) text``, dated at the last message it covers."""
    lines = []
    for m in memories:
        text = m.content.text
        if m.kind is MemoryKind.SUMMARY:
            n = m.content.metadata.get("messages", "earlier")
            lines.append(f"[{_stamp(m.created_at)}] (summary of {n} messages) {text}")
            continue
        if m.content.attachments:
            names = ", ".join(_describe_attachment(a) for a in m.content.attachments)
            text = f"{text} [attachments: {names}]".strip()
        lines.append(f"[{_stamp(m.created_at)}] {_speaker(m)}: {text}")
    return "\n".join(lines)


class StateComposer:
    """Composes :class:`State`. Sits after the message manager (the inbound message is stored and
    embedded, so recall can use its vector) and before generation (which renders it)."""

    name = "state"

    def __init__(
        self, *, recent_messages: int = 20, recall_k: int = 6, min_recall_score: float = 0.35
    ) -> None:
        self.recent_messages = recent_messages
        self.recall_k = recall_k
        self.min_recall_score = min_recall_score

    async def process(self, turn: Turn) -> None:
        rt = turn.runtime
        assert turn.inbound is not None and turn.room is not None and turn.entity is not None
        seed = rt.next_seed()
        rng = random.Random(seed)

        recent_newest_first = await rt.store.get_memories(
            agent_id=rt.agent_id,
            room_id=turn.room.id,
            kinds=[MemoryKind.MESSAGE],
            limit=self.recent_messages,
            embeddings=False,
        )
        recent = list(reversed(recent_newest_first))
        if all(m.id != turn.inbound.id for m in recent):
            recent.append(turn.inbound)
        recalled: list[ScoredMemory] = []
        if self.recall_k and turn.inbound.embedding is not None:
            recalled = await rt.store.search_memories(
                agent_id=rt.agent_id,
                embedding=turn.inbound.embedding,
                embedding_model=rt.embedder.model_id,
                k=self.recall_k,
                kinds=[MemoryKind.MESSAGE, MemoryKind.SUMMARY],
                exclude_ids=[m.id for m in recent],
                min_score=self.min_recall_score,
                embeddings=False,
            )
        facts = await rt.store.get_memories(
            agent_id=rt.agent_id,
            entity_id=turn.entity.id,
            kinds=[MemoryKind.FACT],
            limit=20,
            embeddings=False,
        )
        # Nothing said in someone's private conversation surfaces anywhere else.
        visible = Visibility(
            store=rt.store, agent_id=rt.agent_id, room=turn.room, entity_id=turn.entity.id
        )
        shown = {m.id for m in await visible.filter([s.memory for s in recalled])}
        recalled = [s for s in recalled if s.memory.id in shown]
        facts = await visible.filter(facts)

        state = State(recent=recent, recalled=recalled, facts=list(reversed(facts)), seed=seed)
        turn.state = state
        values = sample_persona(rt.character, rng)
        values["senderName"] = turn.message.author.name
        values["message"] = turn.text
        values["recentMessages"] = format_memories(recent)
        if recalled:
            values["recalled"] = (
                "\n## Earlier conversations you remember\n"
                + format_memories([s.memory for s in recalled])
                + "\n"
            )
        if state.facts:
            values["facts"] = (
                f"\n## What you know about {turn.message.author.name}\n"
                + "\n".join(f"- {f.content.text}" for f in state.facts)
                + "\n"
            )

        available = []
        for action in rt.registry.actions.values():
            try:
                if await action.validate(turn):
                    available.append(action)
            except Exception:
                log.exception("action %s: validate failed; hiding it this turn", action.name)
        state.actions = [a.name for a in available]
        # Tool actions are offered through tool calling, not listed by name.
        listed = [a for a in available if a.parameters is None]
        state.named_actions = [a.name for a in listed]
        values["actions"] = "\n".join(
            f"- {a.name}: {a.description}" + "".join(f"\n    e.g. {ex}" for ex in a.examples)
            for a in listed
        )

        providers = sorted(rt.registry.providers.values(), key=lambda p: p.position)
        outputs = await asyncio.gather(
            *(p.provide(turn) for p in providers), return_exceptions=True
        )
        extra = []
        for provider, output in zip(providers, outputs, strict=True):
            if isinstance(output, BaseException):
                log.warning(
                    "context provider %s failed: %r; its section is left out", provider.name, output
                )
                continue
            values.update(output.values)
            if output.text:
                state.sections[provider.name] = output.text
                extra.append(output.text)
        if extra:
            values["providers"] = "\n" + "\n\n".join(extra) + "\n"
        state.values = values
        turn.trace["state"] = {
            "seed": seed,
            "recent": len(recent),
            "recalled": [s.memory.id for s in recalled],
            "facts": len(state.facts),
            "actions": state.actions,
            "sections": sorted(state.sections),
        }
