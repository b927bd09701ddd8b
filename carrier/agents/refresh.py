"""Applying a newer revision to an agent running in this process: the agent manager's part
that the change log's follower (:mod:`carrier.agents.follow`) and a local edit both call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from carrier.clients import client_of_slot

if TYPE_CHECKING:
    from carrier.agents.status import Running
    from carrier.character import Character
    from carrier.fleet.base import FleetStore
    from carrier.llm.base import ModelProvider
    from carrier.memory.embedder import Embedder
    from carrier.settings import Settings

__all__ = ["Revisions"]


class Revisions:
    """A mixin of :class:`~carrier.agents.manager.AgentManager`, which provides what is
    declared here."""

    _running: dict[str, Running]
    settings: Settings
    embedder: Embedder
    environ: Mapping[str, str]
    fleet: Callable[[], Awaitable[FleetStore]]
    character: Callable[[str], Awaitable[Character]]
    _lock: Callable[[str], asyncio.Lock]
    _model_for: Callable[[Character], ModelProvider | None]
    _push_config: Callable[[str, str, Running], Awaitable[bool]]

    async def refresh(self, agent_id: str) -> None:
        """Apply the stored head to the agent running here, if it is newer than what it runs
        (another process edited it)."""
        running = self._running.get(agent_id)
        if running is None:
            return
        fleet = await self.fleet()
        head = await fleet.head(agent_id)
        if head is None or head.number <= running.revision:
            return
        async with self._lock(agent_id):
            character = await self.character(agent_id)
            await self._apply(agent_id, character, head.number)

    async def _apply(self, agent_id: str, character: Character, revision: int) -> None:
        """Give the agent running here (if it is) ``character``, revision ``revision``: from
        its next turn, with its model chosen again and its clients' configuration pushed."""
        running = self._running.get(agent_id)
        if running is None:
            return
        running.runtime.character = character
        running.revision = revision
        await self._swap_model(running, character)
        for name in dict.fromkeys(client_of_slot(slot) for slot in running.clients):
            await self._push_config(agent_id, name, running)

    async def _swap_model(self, running: Running, character: Character) -> None:
        from carrier.assemble import choose_model, given_model, guard_model

        given = self._model_for(character)
        choice = (
            given_model(given)
            if given is not None
            else choose_model(
                character, self.settings, embedder=self.embedder, environ=self.environ
            )
        )
        running.model, running.model_note = choice.model, choice.note
        running.offline = choice.offline
        old, running.runtime.model = running.runtime.model, choice.provider
        # Behind its budgets at once, not at the next turn: a caption written before then too.
        guard_model(running.runtime, strict=False)
        if old is not choice.provider:
            await old.aclose()
