"""Stage 2, the state composer: everything the model should know for this turn.

A sampled persona, the room's recent messages, semantically recalled memories, facts about the
sender, the actions available now, and the sections of the registered context providers.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from carrier.memory.visibility import Visibility
from carrier.persona import sample_persona
from carrier.pipeline.base import Turn
from carrier.plugins import ContextProvider, ProviderOutput
from carrier.prompt_data import conversation, facts_block, format_memories, speaker_labels
from carrier.types import Memory, MemoryKind, MemoryStatus, ScoredMemory, stable_id
from carrier.untrusted import Speaker, SpeakerLabels, block, clean_name, element

__all__ = ["State", "StateComposer"]

log = logging.getLogger(__name__)

_ROOMS_KEPT = 256
"""Rooms whose history the composer keeps between turns (the most recently active; a room
further back has its history decoded anew, as before)."""


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
    labels: SpeakerLabels | None = None
    """How this turn's prompt names each speaker (see :class:`carrier.untrusted.SpeakerLabels`)."""
    seed: int = 0


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
        self._history: OrderedDict[str, dict[str, Memory]] = OrderedDict()
        """Each room's history as last read, by memory id (the last :data:`_ROOMS_KEPT` rooms):
        the next turn there decodes only what is new or changed (``get_memories_reusing``).
        The memories are only rendered, never changed."""

    def forget(self) -> None:
        """Drop the histories kept between turns (someone's memories were deleted: none of them
        stays in memory either, even until their room's next turn)."""
        self._history.clear()

    async def process(self, turn: Turn) -> None:
        rt = turn.runtime
        assert turn.inbound is not None and turn.room is not None and turn.entity is not None
        seed = rt.next_seed()
        rng = random.Random(seed)

        # The turn's message is known too, as stored (its vector is not, until the turn ends).
        known = {
            **self._history.get(turn.room.id, {}),
            turn.inbound.id: turn.inbound.model_copy(
                update={"embedding": None, "embedding_model": None}
            ),
        }
        recent_newest_first = await rt.store.get_memories_reusing(
            agent_id=rt.agent_id,
            room_id=turn.room.id,
            kinds=[MemoryKind.MESSAGE],
            limit=self.recent_messages,
            known=known,
        )
        self._history[turn.room.id] = {m.id: m for m in recent_newest_first}
        self._history.move_to_end(turn.room.id)
        while len(self._history) > _ROOMS_KEPT:
            self._history.popitem(last=False)
        # A reply that never reached the room (its send failed, or it went stale after a crash)
        # is not part of the conversation people saw: the model must not think it said it.
        agent_entity = stable_id(rt.agent_id, "agent")
        recent = [
            m
            for m in reversed(recent_newest_first)
            if not (m.entity_id == agent_entity and m.status is MemoryStatus.FAILED)
        ]
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
        # Everything below that people wrote (or memory brought back) is data: escaped, fenced,
        # speakers as labels (carrier.untrusted); the generator puts it in the user message.
        labels = await speaker_labels(
            rt.store,
            [*recent, *(s.memory for s in recalled)],
            agent_id=rt.agent_id,
            agent_name=rt.character.name,
            agent_names=rt.names,
            also=[Speaker(turn.entity.id, turn.message.author.name, turn.message.author.username)],
        )
        state.labels = labels
        sender = labels.label(turn.entity.id)
        values["senderName"] = sender
        values["message"] = element("message", turn.text, from_=sender)
        values["recentMessages"] = conversation(
            recent,
            labels,
            platform=turn.room.platform,
            room=clean_name(turn.room.name, limit=64, fallback=""),
        )
        if recalled:
            values["recalled"] = block(
                "memories", [format_memories([s.memory for s in recalled], labels)]
            )
        if state.facts:
            values["facts"] = facts_block(state.facts, about=sender)

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
        outputs = await _provide(providers, turn)
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
                # A plugin's section may carry anything it fetched: data, like the rest.
                extra.append(element("context", output.text, source=provider.name))
        if extra:
            values["providers"] = "\n".join(extra)
        state.values = values
        turn.trace["state"] = {
            "seed": seed,
            "recent": len(recent),
            "recalled": [s.memory.id for s in recalled],
            "facts": len(state.facts),
            "actions": state.actions,
            "sections": sorted(state.sections),
        }


async def _provide(
    providers: list[ContextProvider], turn: Turn
) -> list[ProviderOutput | BaseException]:
    """Each provider's output, or what it raised, in the order of ``providers``. Those that
    call out run at once, each in its own task, while the local ones run here in turn."""
    outputs: dict[str, ProviderOutput | BaseException] = {}
    calls: dict[str, asyncio.Future[ProviderOutput]] = {}
    try:
        for provider in providers:
            if not provider.local:
                try:
                    calls[provider.name] = asyncio.ensure_future(provider.provide(turn))
                except Exception as exc:
                    outputs[provider.name] = exc
        for provider in providers:
            if provider.local:
                try:
                    outputs[provider.name] = await provider.provide(turn)
                except Exception as exc:
                    outputs[provider.name] = exc
        called = await asyncio.gather(*calls.values(), return_exceptions=True)
    finally:
        # Nothing once they are done; if the turn is cancelled meanwhile, they stop with it.
        for call in calls.values():
            call.cancel()
    outputs.update(zip(calls, called, strict=True))
    return [outputs[p.name] for p in providers]
