"""AgentManager: many agents in one process, each created, edited, started or stopped on its own.

Agents live in the store, not in a process: their character as numbered revisions in the fleet
store (mirrored by the memory store's ``AgentRecord``), and a desired state that every process
applies (:mod:`carrier.agents.follow`). A running agent has an :class:`AgentRuntime` here and the
platform clients its character lists (found through ``carrier.clients`` entry points)::

    manager = AgentManager(store=store, embedder=embedder, settings=settings, environ=os.environ)
    record = await manager.create(character)     # revision 1, stopped
    status = await manager.start(record.id)      # desired running; runtime + clients here
    result = await manager.runtime(record.id).handle(message)
    await manager.close()                        # halts every agent here; desired states stay

``start``/``stop`` change the desired state and run/halt here; ``run``/``halt`` only act here
(what a host does when it resumes, and what the follower does with others' changes). Client
configuration: :mod:`carrier.agents.client_config`; revisions read: :mod:`carrier.agents.history`.

Clients start through :class:`~carrier.agents.connections.Connections`: one that connects as an
account (a Discord bot token) only while this process holds that account's lease in the fleet,
so several processes never open two connections for one token.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from carrier.agents.client_config import ClientConfigs
from carrier.agents.connections import Connections
from carrier.agents.errors import AgentExists, AgentNotFound, AgentNotRunning
from carrier.agents.history import History
from carrier.agents.leases import lease_timings
from carrier.agents.refresh import Revisions
from carrier.agents.reports import ClientReports
from carrier.agents.status import AgentStatus, Running
from carrier.assemble import build_runtime, load_embedder
from carrier.audit.base import AuditLog, audit_from
from carrier.audit.context import current_actor
from carrier.audit.model import AuditKind
from carrier.character import Character, character_data, parse_character
from carrier.client_checks import character_config_problems
from carrier.clients import Client, ClientFactory, client_of_slot, discover_clients
from carrier.errors import CharacterError, UserError
from carrier.fleet.base import UNCHANGED, FleetStore
from carrier.fleet.model import Desired, DesiredState, Revision, RevisionSource
from carrier.llm.base import ModelProvider
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder
from carrier.memory.rights import ForgetReport, forget_entity
from carrier.plugins import Plugin
from carrier.runtime import AgentRuntime
from carrier.settings import Settings
from carrier.tool_registry import ToolRegistry
from carrier.tools.policy import ToolPolicy
from carrier.types import AgentRecord, utcnow

if TYPE_CHECKING:
    pass

__all__ = ["AgentManager", "ModelFactory"]

log = logging.getLogger(__name__)

ModelFactory = Callable[[Character], ModelProvider | None]
"""Picks a character's model; ``None`` falls back to :func:`carrier.assemble.choose_model`."""


class AgentManager(ClientConfigs, History, Revisions):
    """Creates, stores, starts and stops agents. Keyword-only; one per process."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        environ: Mapping[str, str],
        model_factory: ModelFactory | None = None,
        client_factories: Mapping[str, ClientFactory] | None = None,
        plugins: Sequence[Plugin] = (),
        services: Mapping[str, Any] | None = None,
        start_clients: bool = True,
        group: str | None = None,
        serves_api: bool = True,
        fleet: FleetStore | None = None,
        lease_options: Mapping[str, float] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.environ = environ
        self.model_factory = model_factory
        self._factories = dict(client_factories) if client_factories is not None else None
        self._plugins = list(plugins)
        self.services: dict[str, Any] = dict(services or {})
        """Given to every runtime started here (``runtime.services``), e.g. ``"jobs"``."""
        self.start_clients = start_clients
        self.group = group
        """This process's worker group (``carrier run --group``): it runs the agents placed on
        that group, and those placed nowhere in particular."""
        """False: agents started here answer the API only, and their platform clients are left
        to another process (``carrier serve --no-clients`` beside ``carrier run --no-api``), so a
        bot never connects twice."""
        self.serves_api = serves_api
        """False: nothing here answers the API (``carrier run --no-api``), so turns left on the
        API's platform are not this process's to settle (:mod:`carrier.agents.connections`)."""
        self.tools = ToolRegistry(
            store=store, environ=environ, policy=ToolPolicy.from_settings(settings)
        )
        self._running: dict[str, Running] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sources: dict[str, str] = {}
        self._fleet = fleet
        self._owns_fleet = fleet is None  # a fleet given is the host's: opened and closed there
        self._fleet_opened = fleet is not None
        self._fleet_lock = asyncio.Lock()
        if lease_options is None:
            lease_options = lease_timings(settings.connection_lease_seconds)
        self.connections = Connections(
            self, running=self._running, lock=self._lock, lease_options=lease_options
        )
        """The agents' clients here, under connection leases (``lease_options``: ``ttl_s``,
        ``beat_s``, ``retry_s``, ``defer_s`` of :class:`~carrier.agents.leases.ConnectionLeases`;
        by default from ``CARRIER_CONNECTION_LEASE_SECONDS``)."""
        self.reports = ClientReports(self)
        """Client states published for the other processes, and theirs read."""

    @property
    def factories(self) -> dict[str, ClientFactory]:
        """Installed client factories (discovered once, on first use)."""
        if self._factories is None:
            self._factories = discover_clients()
        return self._factories

    async def refresh_tools(self) -> None:
        """Apply the registered tools to every running agent (after a tool was added or removed)."""
        for running in self._running.values():
            await self.tools.apply(running.runtime)

    def add_plugin(self, plugin: Plugin) -> None:
        """Register a plugin (hooks, actions) in every running agent and every one started later;
        it replaces a plugin of the same name added before."""
        for running in self._running.values():
            registry = running.runtime.registry
            if plugin.name in registry.plugins:
                registry.unregister(plugin.name)
            registry.register(plugin)
        self._plugins = [p for p in self._plugins if p.name != plugin.name] + [plugin]

    @property
    def audit(self) -> AuditLog:
        """The host's audit log (``services["audit"]``), or one that records nothing."""
        return audit_from(self.services)

    def _lock(self, agent_id: str) -> asyncio.Lock:
        return self._locks.setdefault(agent_id, asyncio.Lock())

    async def fleet(self) -> FleetStore:
        """The fleet store: the host's, or (tests, tools) one beside the settings' store, opened
        on first use and closed by :meth:`close`."""
        async with self._fleet_lock:
            if self._fleet is None:
                self._fleet = FleetStore.from_settings(self.settings)
            if not self._fleet_opened:
                await self._fleet.open()
                self._fleet_opened = True
            return self._fleet

    # -- records ----------------------------------------------------------------------------
    async def create(
        self,
        character: Character,
        *,
        source: RevisionSource = RevisionSource.API,
        actor: str | None = None,
    ) -> AgentRecord:
        """Store a new, stopped agent as revision 1 of its character. Raises :class:`AgentExists`
        if its id is taken, and :class:`CharacterError` if a client section does not fit its
        installed client's settings."""
        self._check_client_configs(character)
        agent_id = character.agent_id
        fleet = await self.fleet()
        async with self._lock(agent_id):
            existing = await self.store.get_agent(agent_id)
            if existing is not None:
                raise AgentExists(agent_id, existing.name)
            data = character_data(character)
            revision = await fleet.add_revision(
                agent_id, data, source=source, actor=actor or current_actor()
            )
            await self._audit_revision(revision)
            record = AgentRecord(id=agent_id, name=character.name, character=data)
            await self.store.upsert_agent(record)
            if character.source:
                self._sources[agent_id] = character.source
            return record

    async def list(self) -> list[AgentRecord]:
        return await self.store.list_agents()

    async def get(self, agent_id: str) -> AgentRecord:
        record = await self.store.get_agent(agent_id)
        if record is None:
            raise AgentNotFound(agent_id)
        return record

    async def character(self, agent_id: str) -> Character:
        """The agent's character, parsed from the store."""
        record = await self.get(agent_id)
        return parse_character(record.character, source=self._sources.get(agent_id))

    async def status(self, agent_id: str) -> AgentStatus:
        record = await self.get(agent_id)
        fleet = await self.fleet()
        desired = await fleet.desired(agent_id)
        head = await fleet.head(agent_id)
        base = AgentStatus(
            record=record, desired=desired, revision=head.number if head is not None else None
        )
        running = self._running.get(agent_id)
        if running is None:
            return base
        base.running = True
        base.model, base.model_note, base.offline = (
            running.model,
            running.model_note,
            running.offline,
        )
        base.clients = list(running.clients)
        base.skipped = dict(running.skipped)
        base.interrupted = running.interrupted
        return base

    async def update(
        self,
        agent_id: str,
        character: Character,
        *,
        source: RevisionSource = RevisionSource.API,
        actor: str | None = None,
        note: str | None = None,
        expected_revision: int | None = None,
    ) -> AgentRecord:
        """Store the character as the agent's next revision. A running agent keeps its runtime
        and uses the new character from its next turn (its model is chosen again and its clients
        get their new configuration; a changed ``clients`` list applies at the next start), here
        and, through the change log, in every other process. The agent keeps its id even when the
        name changes. ``expected_revision``: refuse (:class:`RevisionConflict`) unless the head
        is that revision, so an edit made on a stale read does not undo another."""
        if character.id is not None and character.id != agent_id:
            raise UserError(
                f"the character's id {character.id!r} does not match the agent {agent_id!r}; "
                "remove `id` or make it equal"
            )
        if character.agent_id != agent_id:
            character = character.model_copy(update={"id": agent_id})
        self._check_client_configs(character)
        await self.history(agent_id)  # a store from before revisions: its character first
        fleet = await self.fleet()
        async with self._lock(agent_id):
            record = await self.get(agent_id)
            data = character_data(character)
            revision = await fleet.add_revision(
                agent_id,
                data,
                source=source,
                actor=actor or current_actor(),
                note=note,
                expected_head=expected_revision,
            )
            await self._audit_revision(revision)
            record.name, record.character = character.name, data
            record.updated_at = utcnow()
            await self.store.upsert_agent(record)
            if character.source:
                self._sources[agent_id] = character.source
            await self._apply(agent_id, character, revision.number)
            return record

    def _check_client_configs(self, character: Character) -> None:
        """Every ``clientConfig.<name>`` of an installed client fits that client's settings
        (:func:`carrier.client_checks.character_config_problems`), or :class:`CharacterError`
        names each problem at its path: however the character came (API, console, a file,
        a revert)."""
        problems = character_config_problems(character, self.factories)
        if problems:
            raise CharacterError(character.source, problems)

    async def revert(
        self, agent_id: str, number: int, *, source: RevisionSource = RevisionSource.REVERT
    ) -> Revision:
        """Bring revision ``number``'s character back as a new revision (history is kept)."""
        old = await self.revision(agent_id, number)
        character = parse_character(old.character, source=self._sources.get(agent_id))
        await self.update(agent_id, character, source=source, note=f"revert to revision {number}")
        return await self.head(agent_id)

    async def delete(self, agent_id: str) -> None:
        """Stop the agent if it runs, then delete it with everything it owns (memories, rooms,
        entities, uploaded files, revisions)."""
        await self.halt(agent_id)
        fleet = await self.fleet()
        async with self._lock(agent_id):
            if not await self.store.delete_agent(agent_id):
                raise AgentNotFound(agent_id)
            await fleet.delete_agent(agent_id)
            for folder in ("media", "uploads"):
                path = self.settings.data_dir / folder / agent_id
                await asyncio.to_thread(shutil.rmtree, path, True)
            self._sources.pop(agent_id, None)
        self._locks.pop(agent_id, None)

    # -- desired state ------------------------------------------------------------------------
    async def start(self, agent_id: str, *, placement: str | None = UNCHANGED) -> AgentStatus:
        """Say the agent should run (every process follows: after a restart it runs again), and
        run it here (:meth:`run`) if it runs here. ``placement``: only workers of that group
        (``carrier run --group``) run its clients; None, any worker; left out, as it was.
        Starting a running agent does nothing more."""
        await self.get(agent_id)
        desired = await (await self.fleet()).set_desired(
            agent_id, DesiredState.RUNNING, placement=placement, actor=current_actor()
        )
        if self.runs_here(desired):
            return await self.run(agent_id)
        await self.halt(agent_id)  # placed on another group: its clients leave this process
        return await self.status(agent_id)

    async def stop(self, agent_id: str) -> AgentStatus:
        """Say the agent should not run, and stop it here (:meth:`halt`) and, through the change
        log, in every other process."""
        await self.get(agent_id)
        await (await self.fleet()).set_desired(
            agent_id, DesiredState.STOPPED, actor=current_actor()
        )
        await self.halt(agent_id)
        return await self.status(agent_id)

    async def resume(self) -> builtins.list[str]:
        """The ids of the agents that should run here (their desired state, and their placement
        for a process that runs clients), in name order: what a host starts (:meth:`run`) after
        a restart."""
        fleet = await self.fleet()
        wanted = {d.agent_id for d in await fleet.all_desired() if self.runs_here(d)}
        return [r.id for r in await self.store.list_agents() if r.id in wanted]

    def runs_here(self, desired: Desired | None) -> bool:
        """Whether an agent with this desired state runs in this process: it should run, and,
        where clients run here, it is placed on no group or on this process's group."""
        if desired is None or desired.state != DesiredState.RUNNING:
            return False
        return not self.start_clients or desired.placement in (None, self.group)

    # -- in this process ----------------------------------------------------------------------
    async def run(self, agent_id: str) -> AgentStatus:
        """Build and start the agent's runtime here, then each client its character lists.
        Running a running agent does nothing. A client that cannot start is skipped with the
        reason. The desired state is not changed (:meth:`start` does that)."""
        async with self._lock(agent_id):
            if agent_id not in self._running:
                head, _ = await self.history(agent_id)
                character = await self.character(agent_id)
                runtime, choice = build_runtime(
                    character,
                    settings=self.settings,
                    store=self.store,
                    embedder=self.embedder,
                    environ=self.environ,
                    model=self._model_for(character),
                )
                runtime.services.update(self.services)
                for plugin in self._plugins:
                    runtime.registry.register(plugin)
                await self.tools.apply(runtime)
                running = Running(
                    runtime=runtime,
                    model=choice.model,
                    model_note=choice.note,
                    offline=choice.offline,
                    revision=head.number,
                )
                # Leased clients' platforms are settled when their lease is taken, not here.
                leases = await self.connections.lease_names(agent_id, character)
                running.interrupted = await runtime.start(
                    recover=self.connections.start_scope(character, leases)
                )
                try:
                    await self._warm(runtime)
                except BaseException:  # an embedder that cannot load: the agent does not run
                    await runtime.stop()
                    raise
                self._running[agent_id] = running
                self.reports.ensure_started()
                # Debug: the caller reports it once (carrier run prints it, the API route logs it)
                log.debug("%s (%s): %s", character.name, agent_id, choice.description)
                for slot in self.connections.slots(character, leases):
                    await self.connections.start(agent_id, slot, running, leases.get(slot))
                await self.audit.record(
                    AuditKind.AGENT_START,
                    actor=current_actor(),
                    agent_id=agent_id,
                    action="start",
                    detail={
                        "model": choice.model,
                        "clients": list(running.clients),
                        "skipped": sorted(running.skipped),
                    },
                )
        return await self.status(agent_id)

    async def halt(self, agent_id: str) -> None:
        """Stop the agent's clients and runtime here; other agents, other processes and the
        desired state are not touched."""
        async with self._lock(agent_id):
            running = self._running.pop(agent_id, None)
            if running is not None:
                for name, client in running.clients.items():
                    try:
                        await client.stop()
                    except Exception:
                        log.exception("client %s of agent %s did not stop cleanly", name, agent_id)
                # After the stops: a lease is handed over once its connection is closed.
                for name in {*running.clients, *running.skipped}:
                    await self.connections.drop(agent_id, name)
                await running.runtime.stop()
                await self.audit.record(
                    AuditKind.AGENT_STOP,
                    actor=current_actor(),
                    agent_id=agent_id,
                    action="stop",
                    detail={"clients": list(running.clients)},
                )

    def runtime(self, agent_id: str) -> AgentRuntime:
        """The running agent's runtime; :class:`AgentNotRunning` when it is not started."""
        running = self._running.get(agent_id)
        if running is None:
            raise AgentNotRunning(agent_id)
        return running.runtime

    def running_ids(self) -> builtins.list[str]:
        return list(self._running)

    def running_items(self) -> builtins.list[tuple[str, Running]]:
        return list(self._running.items())

    def client(self, agent_id: str, name: str) -> Client | None:
        """A started client of a running agent, by name (or slot); of a client whose account
        is made of parts, the first part running here."""
        running = self._running.get(agent_id)
        if running is None:
            return None
        if name in running.clients:
            return running.clients[name]
        parts = [c for slot, c in running.clients.items() if client_of_slot(slot) == name]
        return parts[0] if parts else None

    async def close(self) -> None:
        """Stop every agent running here (their desired states stay: a restart runs them again),
        then the fleet store if the manager opened it. Each connection lease is released as its
        clients stop, so other processes take them over at once."""
        await self.connections.quiesce()
        for agent_id in list(self._running):
            try:
                await self.halt(agent_id)
            except Exception:
                log.exception("agent %s did not stop cleanly", agent_id)
        await self.connections.close()
        await self.reports.close()
        async with self._fleet_lock:
            if self._owns_fleet and self._fleet is not None and self._fleet_opened:
                await self._fleet.close()
                self._fleet_opened = False

    async def forget(self, agent_id: str, entity_id: str) -> ForgetReport:
        """Delete what the agent keeps of a person (see :func:`carrier.memory.rights.forget_entity`)."""
        await self.get(agent_id)
        running = self._running.get(agent_id)
        if running is not None:
            return await running.runtime.forget(entity_id)
        return await forget_entity(
            self.store, agent_id=agent_id, entity_id=entity_id, audit=self.audit
        )

    async def _audit_revision(self, revision: Revision) -> None:
        await self.audit.record(
            AuditKind.CHARACTER_REVISION,
            actor=revision.actor,
            agent_id=revision.agent_id,
            action=revision.source.value,
            detail={"revision": revision.number, "note": revision.note},
        )

    # -- internals --------------------------------------------------------------------------
    async def _warm(self, runtime: AgentRuntime) -> None:
        """Before the agent reports running: its vector search loaded (the index the first
        recall needs) and the embedder loaded and warmed up, so its first answer costs a normal
        turn. (``runtime.start`` has loaded the model's library.) A search that failed to load
        was logged by the runtime, and recall falls back to the database."""
        await asyncio.gather(runtime.search_ready(), load_embedder(self.embedder))

    def _model_for(self, character: Character) -> ModelProvider | None:
        return self.model_factory(character) if self.model_factory is not None else None
