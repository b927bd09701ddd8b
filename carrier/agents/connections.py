"""The platform connections of one process's agents: started under leases, taken over, given up.

:class:`Connections` is the :class:`~carrier.agents.manager.AgentManager`'s part that starts an
agent's clients. A client whose factory declares a ``connection_key`` (Discord: its bot token)
starts only while this process holds the connection's lease (:mod:`carrier.agents.leases`);
otherwise it is shown as running elsewhere, and started here the moment the lease is taken over.

An account made of several connections (a Discord bot with a shard count: the factory's
``connection_parts``) has a lease per part, so its shards are spread over the processes like
separate accounts; each part's client runs under its slot name (``discord#0/4``) and a takeover
settles only the messages that came through that part.

Which turns a process settles after a stop follows what it serves (:class:`~carrier.outbox.
Platforms`): at an agent's start, every platform but the leased ones when it serves the API and
starts clients (one process: as before leases existed), the API's and the terminal's when it
starts no clients (the web process), its unleased clients' when it serves no API (a worker); a
leased platform's when its lease is taken, from that moment on, before its client connects;
then the messages the previous holder left unanswered, still fresh, go to the new client to run
again when it can (a ``resume`` method), and are failed when it cannot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from carrier.agents.leases import (
    ConnectionLeases,
    Holding,
    User,
    connection_key_of,
    connection_parts_of,
    describe_elsewhere,
    lease_name,
)
from carrier.agents.status import Running
from carrier.clients import (
    NOT_HERE,
    ClientFactory,
    ClientUnavailable,
    ConnectionPart,
    client_of_slot,
    part_slot,
)
from carrier.fleet.presence import process_id
from carrier.serving import Platforms
from carrier.types import Memory

if TYPE_CHECKING:
    from carrier.agents.manager import AgentManager

__all__ = ["NO_CLIENTS", "Connections"]

log = logging.getLogger(__name__)

NO_CLIENTS = (
    f"{NOT_HERE} (it runs without platform clients: carrier serve --no-clients); "
    "the worker process (carrier run) runs them"
)


class Connections:
    """Starts and stops the clients of the agents running in one process. Built by the manager,
    which passes its running agents and their locks."""

    def __init__(
        self,
        manager: AgentManager,
        *,
        running: Mapping[str, Running],
        lock: Callable[[str], asyncio.Lock],
        lease_options: Mapping[str, float] | None = None,
    ) -> None:
        self.manager = manager
        self._running = running
        self._lock = lock
        self._options = dict(lease_options or {})
        self._leases: ConnectionLeases | None = None
        self._leases_lock = asyncio.Lock()
        self._parts: dict[User, ConnectionPart] = {}
        """The part each part slot of a running agent runs (``(agent id, slot)``)."""

    @property
    def leases(self) -> ConnectionLeases | None:
        """The connection leases of this process (None until a leased client was wanted)."""
        return self._leases

    # -- at an agent's start ----------------------------------------------------------------
    async def lease_names(self, agent_id: str, character: Any) -> dict[str, str]:
        """The lease each client of ``character`` needs here, by slot: only clients whose
        factory declares a key and that would connect (the key is not None), and none in a
        process that starts no clients. An account of several parts has a slot and a lease per
        part (``discord#0/4``: ``conn:discord:<key>#0/4``)."""
        if not self.manager.start_clients:
            return {}
        names: dict[str, str] = {}
        for name in dict.fromkeys(str(c).lower() for c in character.clients):
            factory = self.manager.factories.get(name)
            key_of = connection_key_of(factory)
            if key_of is None:
                continue
            try:
                config = await self.manager.effective_client_config(agent_id, name)
                key = key_of(character, config, self.manager.environ)
                parts_of = connection_parts_of(factory)
                parts = parts_of(character, config, self.manager.environ) if parts_of else None
            except Exception:  # its start reports what is wrong with it
                log.debug("client %s of agent %s: no connection key", name, agent_id, exc_info=True)
                continue
            if not key:
                continue
            for part in parts or ():
                slot = part_slot(name, part.name)
                self._parts[(agent_id, slot)] = part
                names[slot] = lease_name(name, f"{key}#{part.name}")
            if not parts:
                names[name] = lease_name(name, key)
        return names

    def part(self, agent_id: str, slot: str) -> ConnectionPart | None:
        """The part a slot of a running agent runs (None: the client is one connection)."""
        return self._parts.get((agent_id, slot))

    @staticmethod
    def slots(character: Any, leases: Mapping[str, str]) -> list[str]:
        """What to start for ``character``, in its clients' order: each client, or each part
        of a client whose account is made of parts (the slots of ``leases``)."""
        out: list[str] = []
        for name in dict.fromkeys(str(c).lower() for c in character.clients):
            parted = [slot for slot in leases if slot != name and client_of_slot(slot) == name]
            out.extend(parted or [name])
        return out

    def start_scope(self, character: Any, leased: Collection[str]) -> Platforms:
        """The platforms whose turns this process settles at the agent's start (see the
        module's docstring)."""
        clients = frozenset(str(c).lower() for c in character.clients)
        leased = frozenset(client_of_slot(slot) for slot in leased)
        if not self.manager.start_clients:
            return Platforms(exclude=clients)
        if not self.manager.serves_api:
            return Platforms(only=clients - frozenset(leased))
        return Platforms(exclude=frozenset(leased))

    async def start(
        self, agent_id: str, name: str, running: Running, lease: str | None = None
    ) -> None:
        """Start one client (or one part's: ``name`` is its slot) of a running agent (the
        caller holds the agent's lock): under its lease when it has one, after settling what
        the lease's previous holder left."""
        if not self.manager.start_clients:
            running.skipped[name] = NO_CLIENTS
            return
        client_name = client_of_slot(name)
        factory = self.manager.factories.get(client_name)
        if factory is None:
            running.skipped[name] = f"no '{client_name}' client is installed in this version"
            return
        part = self._parts.get((agent_id, name))
        left: list[Memory] = []
        if lease is not None:
            holding = await (await self._get_leases()).want(lease, (agent_id, name))
            if not holding.held:
                running.skipped[name] = describe_elsewhere(holding)
                return
            left = await self._settle(agent_id, name, running, part, holding.since)
        if not await self._launch(agent_id, name, running, factory, part, left):
            await running.runtime.outbox.interrupt(left)
            if lease is not None:
                await self.drop(agent_id, name)

    async def _settle(
        self,
        agent_id: str,
        name: str,
        running: Running,
        part: ConnectionPart | None,
        since: datetime | None,
    ) -> list[Memory]:
        """Settle what the lease's previous holder left on this platform (or part), before
        this process's client connects; the messages it left unanswered and still fresh are
        returned, for the client to run again (:meth:`carrier.outbox.Outbox.recover`)."""
        scope = Platforms.of(client_of_slot(name), where=part.covers if part else None)
        report = await running.runtime.outbox.recover(platforms=scope, since=since, resume=True)
        running.interrupted += report.found
        if report.found:
            log.warning(
                "%s: %d message(s) were left unfinished on %s by its previous holder: %d to run "
                "again, %d failed with no reply, %d reply(ies) left to send, %d too old (failed)",
                running.runtime.character.name,
                report.found,
                name,
                len(report.resumable),
                report.interrupted,
                report.waiting,
                report.expired,
            )
        return report.resumable

    async def _launch(
        self,
        agent_id: str,
        name: str,
        running: Running,
        factory: ClientFactory,
        part: ConnectionPart | None,
        left: list[Memory],
    ) -> bool:
        """Build and start the client; give it the messages ``left`` to run again once
        connected when it can (a ``resume(messages)`` method), else fail them now."""
        try:
            config = await self.manager.effective_client_config(agent_id, client_of_slot(name))
            if part is not None:
                config = {**config, **part.config}
            client = factory(running.runtime, config, self.manager.environ)
            resume = getattr(client, "resume", None)
            if left and callable(resume):
                resume(left)
            elif left:
                await running.runtime.outbox.interrupt(left)
            await client.start()
        except ClientUnavailable as exc:
            running.skipped[name] = str(exc)
            return False
        except Exception as exc:  # one broken client must not stop the agent or the others
            log.exception("client %s of agent %s failed to start", name, agent_id)
            running.skipped[name] = f"failed to start: {type(exc).__name__}: {exc}"
            return False
        running.skipped.pop(name, None)
        running.clients[name] = client
        return True

    # -- at an agent's halt, and the process's end --------------------------------------------
    async def drop(self, agent_id: str, name: str) -> None:
        """The client no longer runs here: its lease (if no other agent here uses it) is
        released at once, for another process to take."""
        self._parts.pop((agent_id, name), None)
        if self._leases is not None:
            await self._leases.drop((agent_id, name))

    async def quiesce(self) -> None:
        """The process is stopping: take no connection over any more."""
        if self._leases is not None:
            await self._leases.quiesce()

    async def close(self) -> None:
        if self._leases is not None:
            await self._leases.close()

    # -- the lease watcher's calls ------------------------------------------------------------
    async def _acquired(self, lease: str, users: list[User], since: datetime) -> None:
        """This process took ``lease`` over: start the clients waiting for it."""
        for agent_id, name in users:
            async with self._lock(agent_id):
                running = self._running.get(agent_id)
                if running is None or name in running.clients:
                    continue
                log.info("agent %s: taking the %s connection over", agent_id, name)
                await self.start(agent_id, name, running, lease)

    async def _lost(self, lease: str, users: list[User], owner: str | None) -> None:
        """Another process holds ``lease`` now (or it could not be renewed): stop its clients
        here at once; the watcher takes it back if it comes free."""
        for agent_id, name in users:
            async with self._lock(agent_id):
                running = self._running.get(agent_id)
                client = running.clients.pop(name, None) if running is not None else None
                if running is not None:
                    running.skipped[name] = describe_elsewhere(Holding(held=False, owner=owner))
                if client is None:
                    continue
                log.warning("agent %s: the %s connection was lost; stopping it", agent_id, name)
                try:
                    await client.abandon()
                except Exception:
                    log.exception("client %s of agent %s did not stop cleanly", name, agent_id)

    async def _get_leases(self) -> ConnectionLeases:
        async with self._leases_lock:
            if self._leases is None:
                self._leases = ConnectionLeases(
                    await self.manager.fleet(),
                    process_id(self.manager.environ),
                    on_acquired=self._acquired,
                    on_lost=self._lost,
                    **self._options,
                )
            return self._leases
