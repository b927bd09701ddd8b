"""Following the change log: what another process changed, applied here within a second or two.

Every host (``carrier run``, its worker form ``--no-api``, ``carrier serve``) follows the fleet's
change log from the moment it started, and applies each entry to the agents of this process:

- ``desired``: an agent that should run and does not run here is run (with its clients, where
  the host runs clients); one that should not run is halted;
- ``character``: a running agent takes the newer revision from its next turn;
- ``client_config``: the running clients it names get their stored configuration;
- ``deleted``: the agent is halted;
- ``uploads``: media uploaded through the web process are queued by the running publisher.

Applying is idempotent (a process also sees its own entries; running a running agent, or a
revision it runs already, does nothing), so an entry read twice does no harm. Each entry's
failure is logged and the follower goes on; a full pass over every desired state every
:data:`SWEEP_S` seconds repairs anything a missed or failed entry left behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from carrier.agents.manager import AgentManager
from carrier.errors import CarrierError
from carrier.fleet.model import Change, ChangeKind

__all__ = ["SWEEP_S", "Follower"]

log = logging.getLogger(__name__)

SWEEP_S = 30.0
"""Seconds between two full passes over the desired states (the follower's safety net)."""


class Follower:
    """Applies the change log to one process's agents. ``run()`` until cancelled::

    follower = Follower(manager)
    seen = await follower.mark()          # before the host resumes its agents
    ... resume ...
    task = asyncio.create_task(follower.run(after=seen))
    """

    def __init__(
        self,
        manager: AgentManager,
        *,
        on_run: Callable[[str], Awaitable[None]] | None = None,
        wait_s: float = 1.0,
    ) -> None:
        self.manager = manager
        self.on_run = on_run
        """Called with an agent's id after the follower ran it (the host reports it)."""
        self.wait_s = wait_s
        self.applied = 0
        """Entries applied so far."""

    async def mark(self) -> int:
        """Where following starts: the newest entry now. Read it before resuming the agents, so
        a change made while they start is not missed."""
        return await (await self.manager.fleet()).latest_seq()

    async def run(self, *, after: int) -> None:
        fleet = await self.manager.fleet()
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + SWEEP_S
        seen = after
        while True:
            try:
                changes = await fleet.wait_changes(seen, wait_s=self.wait_s)
            except CarrierError as exc:  # the store is down: say so, wait, try again
                log.warning("cannot read the change log (%s); retrying", exc)
                await asyncio.sleep(self.wait_s)
                continue
            for change in changes:
                await self._apply_safely(change)
                seen = change.seq
            if loop.time() >= next_sweep:
                next_sweep = loop.time() + SWEEP_S
                await self.sweep()

    async def sweep(self) -> None:
        """Run every agent that should run and does not, halt every one that runs and should
        not (the desired states as stored now)."""
        try:
            wanted = set(await self.manager.resume())
        except CarrierError as exc:
            log.warning("cannot read the desired states (%s); retrying later", exc)
            return
        running = set(self.manager.running_ids())
        for agent_id in sorted(wanted - running):
            await self._guard(agent_id, self._run(agent_id))
        for agent_id in sorted(running - wanted):
            await self._guard(agent_id, self.manager.halt(agent_id))
        for agent_id in sorted(running & wanted):
            await self._guard(agent_id, self.manager.refresh(agent_id))

    async def apply(self, change: Change) -> None:
        """Apply one entry (see the module's docstring)."""
        agent_id = change.agent_id
        if change.kind == ChangeKind.CLIENT_CONFIG:
            client = str(change.detail.get("client") or "")
            if client:
                await self.manager.push_client_config(agent_id, client)
        elif agent_id is None:
            return
        elif change.kind == ChangeKind.DELETED:
            await self.manager.halt(agent_id)
        elif change.kind == ChangeKind.UPLOADS:
            await self._take_uploads(agent_id)
        elif change.kind == ChangeKind.CHARACTER:
            await self.manager.refresh(agent_id)
        elif change.kind == ChangeKind.DESIRED:
            desired = await (await self.manager.fleet()).desired(agent_id)
            if self.manager.runs_here(desired):
                await self._run(agent_id)
            else:
                await self.manager.halt(agent_id)
        self.applied += 1

    async def _take_uploads(self, agent_id: str) -> None:
        """The agent's publishing clients running here queue the uploads waiting for them."""
        if agent_id not in self.manager.running_ids():
            return  # its publisher starts elsewhere, or later: a start queues what waits
        for name in (await self.manager.status(agent_id)).clients:
            take = getattr(self.manager.client(agent_id, name), "queue_waiting_uploads", None)
            if take is not None:
                await take()

    async def _run(self, agent_id: str) -> None:
        if agent_id in self.manager.running_ids():
            await self.manager.refresh(agent_id)
            return
        if await self.manager.store.get_agent(agent_id) is None:
            return  # deleted meanwhile
        await self.manager.run(agent_id)
        if self.on_run is not None:
            await self.on_run(agent_id)

    async def _apply_safely(self, change: Change) -> None:
        await self._guard(change.agent_id or "*", self.apply(change))

    async def _guard(self, agent_id: str, work: Awaitable[None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("applying a change to agent %s failed; the next sweep retries", agent_id)
