"""An agent's revisions as the agent manager reads them (a mixin of
:class:`~carrier.agents.manager.AgentManager`): the head, a page of them, one of them.

An agent stored before revisions existed gets its stored character recorded as revision 1
(source ``store``) the first time any of these is asked, so every agent has a history.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from carrier.agents.errors import RevisionNotFound
from carrier.fleet.model import Revision, RevisionSource

if TYPE_CHECKING:
    from carrier.fleet.base import FleetStore
    from carrier.types import AgentRecord

__all__ = ["History"]


class History:
    get: Callable[[str], Awaitable[AgentRecord]]
    fleet: Callable[[], Awaitable[FleetStore]]

    async def history(self, agent_id: str) -> tuple[Revision, bool]:
        """The agent's head revision, and whether it was just recorded: an agent stored before
        revisions existed gets its stored character as revision 1 (source ``store``)."""
        record = await self.get(agent_id)
        fleet = await self.fleet()
        head = await fleet.head(agent_id)
        if head is not None:
            return head, False
        head = await fleet.add_revision(
            agent_id,
            record.character,
            source=RevisionSource.STORE,
            note="the character stored before revisions were kept",
        )
        return head, True

    async def head(self, agent_id: str) -> Revision:
        return (await self.history(agent_id))[0]

    async def revisions(
        self, agent_id: str, *, limit: int = 50, before: int | None = None
    ) -> builtins.list[Revision]:
        """The agent's revisions, newest first."""
        await self.history(agent_id)
        return await (await self.fleet()).revisions(agent_id, limit=limit, before=before)

    async def revision(self, agent_id: str, number: int) -> Revision:
        await self.history(agent_id)
        found = await (await self.fleet()).revision(agent_id, number)
        if found is None:
            raise RevisionNotFound(agent_id, number)
        return found
